#!/usr/bin/env bash
# run_fuzz.sh FUZZER SEED_CORPUS RUNS [extra libFuzzer flags...]
# Runs FUZZER from seed 1 for RUNS inputs on a scratch copy of SEED_CORPUS (new inputs it
# finds stay out of the repository). A crash, leak, timeout or out-of-memory fails, and the
# offending input is left in the scratch folder, whose path is printed. Extra flags come
# after the defaults, and libFuzzer takes a flag's last value (e.g. -timeout=60).
# libFuzzer's schedule weighs inputs by their run time, so the sequence is not fully fixed:
# a run that meets slow inputs stops after 240 s (-max_total_time: it passes, having run
# fewer inputs) rather than outlasting ctest's 600 s limit.
set -euo pipefail
fuzzer=$1 seeds=$2 runs=$3; shift 3
work=$(mktemp -d "${TMPDIR:-/tmp}/spillway-fuzz.XXXXXX")
cp -r "$seeds"/. "$work"/
cd "$work"
if "$fuzzer" -seed=1 -runs="$runs" -max_total_time=240 -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
     -print_final_stats=1 "$@" "$work" 2>fuzz.log; then
  tail -n 12 fuzz.log
  rm -rf "$work"
else
  status=$?
  tail -n 60 fuzz.log
  echo "fuzzing failed (exit $status); the input and log are in $work" >&2
  exit 1
fi
