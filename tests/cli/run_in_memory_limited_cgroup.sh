#!/usr/bin/env bash
# A model about twice its memory cgroup's limit runs to completion with --memory-budget auto:
# the plan streams the layers that do not fit, streamed bytes bypass the page cache, and the
# kernel never OOM-kills the process. Skipped (exit 77) where memory cgroups (v1) are not
# writable.
# Usage: run_in_memory_limited_cgroup.sh SPILLWAY_BINARY WORK_DIR
set -euo pipefail
spillway=$1
work=$2

source "$(dirname "$0")/cgroup_test_lib.sh"
cgroup_require_v1

limit_mb=256
model=$work/cgroup-test-model-$$.gguf

cgroup_make_520mb_model "$spillway" "$model"
model_mb=$(( $(stat -c %s "$model") / 1048576 ))
echo "model ${model_mb} MB, cgroup limit ${limit_mb} MB"
[ "$model_mb" -ge $(( 2 * limit_mb * 9 / 10 )) ] || { echo "FAIL: model is not ~2x the limit"; exit 1; }

cgroup=$(cgroup_create run "$limit_mb")
cgroup_cleanup_dir "$cgroup"
oom_before=$(cgroup_oom_kills "$cgroup")

set +e
output=$(cgroup_run "$cgroup" "$spillway" run --model "$model" --prompt "Once upon a time" --max-tokens 6 \
  --temperature 0 --threads 2 --memory-budget auto --json 2>&1)
status=$?
set -e
echo "$output" | grep -E '^(memory:|residency budget|layers:|streaming:)' || true
peak_mb=$(cgroup_peak_mb "$cgroup")
oom_after=$(cgroup_oom_kills "$cgroup")
echo "exit status ${status}, peak cgroup usage ${peak_mb} MB, oom kills $(( oom_after - oom_before ))"

[ "$status" -eq 0 ] || { echo "FAIL: spillway exited with ${status}"; echo "$output" | tail -20; exit 1; }
[ "$oom_after" = "$oom_before" ] || { echo "FAIL: the OOM killer ran"; exit 1; }
grep -qE '^layers: [0-9]+ resident .*, [1-9][0-9]* streamed' <<<"$output" ||
  { echo "FAIL: nothing was streamed"; exit 1; }
grep -q '"tokens":\[[0-9]' <<<"$output" || { echo "FAIL: no tokens generated"; exit 1; }
echo "PASS"
