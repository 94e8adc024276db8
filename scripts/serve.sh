#!/usr/bin/env bash
# Builds Spillway (Release) and serves a model on http://127.0.0.1:8080.
# Usage: scripts/serve.sh [--model PATH] [other `spillway serve` flags]
# Without --model it generates a small random-weight demo model once and serves that.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh build/release -DCMAKE_BUILD_TYPE=Release -DSPILLWAY_TESTS=OFF
args=("$@")
if [[ " $* " != *" --model "* && " $* " != *" --model="* && -z "${SPILLWAY_MODEL:-}" ]]; then
  demo=build/demo/spillway-demo.gguf
  if [ ! -f "$demo" ]; then
    mkdir -p build/demo
    build/release/server/spillway make-demo-model --out "$demo"
  fi
  args=(--model "$demo" "${args[@]}")
fi
exec build/release/server/spillway serve "${args[@]}"
