#!/usr/bin/env bash
# Builds Spillway with ASan + UBSan, assert() and libstdc++ assertions kept, and runs every
# test (unit, golden, end-to-end); then the threaded parts' tests under ThreadSanitizer and the
# fuzz targets for a fixed number of inputs.
# This is the README's test command and the only thing CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh build/test -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPILLWAY_SANITIZE=ON -DSPILLWAY_ASSERTS=ON
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir build/test --output-on-failure -j "$(nproc)"

# ThreadSanitizer: the tests of the parts with threads of their own (the scheduler, the
# engine loop and runner, the HTTP server and request workers, the weight streamer and expert
# cache readers), in a tree of their own. The rest of the suite is single-threaded or runs
# the same code under ASan above.
SPILLWAY_BUILD_TARGET="test_scheduler test_runtime test_server test_engine_io" scripts/build.sh build/tsan \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPILLWAY_TSAN=ON -DSPILLWAY_ASSERTS=ON -DSPILLWAY_BENCH=OFF
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
  ctest --test-dir build/tsan -L '^(scheduler|runtime|server|engine_io)$' --output-on-failure -j "$(nproc)"

# Fuzz targets (tests/fuzz): clang + libFuzzer with ASan + UBSan, a fixed number of inputs
# from a fixed seed each (bench/fuzz.sh runs them for minutes).
CC=clang CXX=clang++ SPILLWAY_BUILD_TARGET=fuzz_targets scripts/build.sh build/fuzz \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPILLWAY_FUZZ=ON -DSPILLWAY_ASSERTS=ON -DSPILLWAY_TESTS=OFF -DSPILLWAY_BENCH=OFF
ctest --test-dir build/fuzz --output-on-failure -j "$(nproc)"
