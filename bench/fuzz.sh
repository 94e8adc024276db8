#!/usr/bin/env bash
# Long fuzzing runs: every libFuzzer target of tests/fuzz for SECONDS each (default 600),
# from its committed seed corpus, with the corpus it grows kept in build/fuzz-corpus/<name>
# (reused by the next run). Prints, per target, the executions, coverage and corpus size;
# fails on the first crash, leak, timeout or out-of-memory (the input is left beside the log).
# Usage: bench/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}; shift || true
CC=clang CXX=clang++ SPILLWAY_BUILD_TARGET=fuzz_targets scripts/build.sh build/fuzz \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPILLWAY_FUZZ=ON -DSPILLWAY_ASSERTS=ON -DSPILLWAY_TESTS=OFF -DSPILLWAY_BENCH=OFF
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=($(ls tests/fuzz/corpus))
fi
for t in "${targets[@]}"; do
  corpus=build/fuzz-corpus/$t
  mkdir -p "$corpus"
  cp -rn tests/fuzz/corpus/$t/. "$corpus"/
  log=build/fuzz-corpus/$t.log
  echo "== $t: ${seconds}s"
  (cd "$corpus" && "../../fuzz/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
     -max_len=65536 -print_final_stats=1 . 2>"../$t.log") || { tail -n 40 "$log"; echo "FAILED: $t (see $log)"; exit 1; }
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$log" | tr '\n' ' '
  grep -oE "cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9]+[a-zA-Z]*" "$log" | tail -n 1
done
