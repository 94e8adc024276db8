#!/usr/bin/env bash
# Configures and builds one build tree. Usage: scripts/build.sh DIR [cmake options...]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$1; shift
launcher=()
# Cache hits across clones and worktrees (CI builds a fresh clone in a folder of its own): paths
# under the checkout are hashed relative to the build, no cwd in the hash. base_dir is the
# checkout, not /: with / the system headers' paths became relative too (../../../../usr/...),
# so every key depended on how deep the clone lay. No compile definition may hold a checkout
# path (tests/support/paths.cpp is the one file that does).
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache); fi
cmake -S . -B "$dir" -G Ninja "${launcher[@]}" "$@" >/dev/null
# SPILLWAY_BUILD_TARGET: build these targets (space-separated, e.g. fuzz_targets) instead of
# everything.
read -ra targets <<< "${SPILLWAY_BUILD_TARGET:-all}"
cmake --build "$dir" -j "$(nproc)" --target "${targets[@]}"
