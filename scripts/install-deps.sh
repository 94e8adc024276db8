#!/usr/bin/env bash
# Installs the Debian 12 packages Spillway needs to build, test and serve, if missing.
# Idempotent: does nothing (and needs no network) when everything is present.
# --train also installs PyTorch (Debian's python3-torch, CPU) for tools/train: the evaluation
# models' training and PyTorch reference runs, never needed to build, test or serve.
set -euo pipefail

with_train=0
for arg in "$@"; do
  case "$arg" in
    --train) with_train=1 ;;
    *) echo "usage: $0 [--train]" >&2; exit 2 ;;
  esac
done

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  prometheus docker-compose
  libboost1.74-dev nlohmann-json3-dev prometheus-cpp-dev libspdlog-dev libfmt-dev
  libcli11-dev liburing-dev libgtest-dev libgmock-dev libbenchmark-dev
  libicu-dev clang libclang-rt-14-dev json-schema-test-suite libvalijson-dev python3 python3-numpy python3-jinja2 python3-prometheus-client curl
)

if [ "$with_train" -eq 1 ]; then packages+=(python3-torch libopenblas0-openmp); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js + npm run the OpenAI SDK tests (tests/e2e/sdk): Debian's, unless one is on PATH.
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "Installing missing packages: ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
