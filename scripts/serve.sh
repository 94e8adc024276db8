#!/usr/bin/env bash
# Builds Spillway (Release) and serves a model on http://127.0.0.1:8080.
# Usage: scripts/serve.sh [--model PATH] [other `spillway serve` flags]
# Without --model, `spillway serve` builds a small random-weight demo model once (the same
# one `spillway make-demo-model` writes with its defaults) at build/demo/spillway-demo.gguf
# and serves that.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh build/release -DCMAKE_BUILD_TYPE=Release -DSPILLWAY_TESTS=OFF
export SPILLWAY_DEMO_MODEL="${SPILLWAY_DEMO_MODEL:-build/demo/spillway-demo.gguf}"
exec build/release/server/spillway serve "$@"
