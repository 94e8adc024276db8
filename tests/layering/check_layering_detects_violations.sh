#!/usr/bin/env bash
# scripts/check-layering.sh must fail on an upward include and on Beast outside server/,
# and pass on a tree that follows the rules. Usage: this script REPO_ROOT
set -euo pipefail
repo=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp"/{engine,scheduler,server,kernels}
echo '#include "kernels/kernels.h"' > "$tmp/engine/good.h"
echo '#include "engine/good.h"' > "$tmp/scheduler/good.h"
echo '#include <boost/beast/http.hpp>' > "$tmp/server/http.h"
SPILLWAY_LAYERING_ROOT="$tmp" bash "$repo/scripts/check-layering.sh" >/dev/null || { echo "a clean tree failed"; exit 1; }

echo '#include "scheduler/good.h"' > "$tmp/engine/bad.h"
if SPILLWAY_LAYERING_ROOT="$tmp" bash "$repo/scripts/check-layering.sh" >/dev/null; then
  echo "engine -> scheduler was not reported"; exit 1
fi
rm "$tmp/engine/bad.h"
echo '#include <boost/asio.hpp>' > "$tmp/kernels/bad.h"
if SPILLWAY_LAYERING_ROOT="$tmp" bash "$repo/scripts/check-layering.sh" >/dev/null; then
  echo "Asio in kernels/ was not reported"; exit 1
fi
echo "layering checker: detects violations"
