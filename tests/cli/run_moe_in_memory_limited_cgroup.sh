#!/usr/bin/env bash
# A MoE model about twice its memory cgroup's limit runs to completion with --memory-budget
# auto through the expert tier (routed experts streamed by expert into a RAM cache, the rest
# resident), without an OOM kill, and generates the tokens an unlimited run generates; the
# expert bytes it reads are at most (1 - hit rate) x the routed-expert bytes it asked for.
# Skipped (exit 77) where memory cgroups (v1) are not writable.
# Usage: run_moe_in_memory_limited_cgroup.sh SPILLWAY_BINARY WORK_DIR
set -euo pipefail
spillway=$1
work=$2

source "$(dirname "$0")/cgroup_test_lib.sh"
cgroup_require_v1

limit_mb=256
model=$work/cgroup-moe-model-$$.gguf
cgroup_cleanup_file "$model"

# ~520 MB of F16 weights: 7 layers of 16 experts (3 x 1024 x 768 each, 4.5 MB) + attention.
"$spillway" make-demo-model --out "$model" --arch qwen3moe --layers 7 --dim 1024 --heads 16 --kv-heads 8 \
  --experts 16 --experts-used 4 --expert-ff 768 --vocab 4096 --context 512 >/dev/null
model_mb=$(( $(stat -c %s "$model") / 1048576 ))
echo "model ${model_mb} MB, cgroup limit ${limit_mb} MB"
[ "$model_mb" -ge $(( 2 * limit_mb * 9 / 10 )) ] || { echo "FAIL: model is not ~2x the limit"; exit 1; }

args=(run --model "$model" --prompt "Once upon a time" --max-tokens 6 --temperature 0 --threads 2 --json)
reference=$("$spillway" "${args[@]}" 2>/dev/null | grep -o '"tokens":\[[0-9,]*\]')

cgroup=$(cgroup_create moe "$limit_mb")
cgroup_cleanup_dir "$cgroup"
oom_before=$(cgroup_oom_kills "$cgroup")
set +e
output=$(cgroup_run "$cgroup" "$spillway" "${args[@]}" --memory-budget auto 2>&1)
status=$?
set -e
echo "$output" | grep -E '^(memory:|residency budget|layers:|streaming:|experts:)' || true
peak_mb=$(cgroup_peak_mb "$cgroup")
oom_after=$(cgroup_oom_kills "$cgroup")
echo "exit status ${status}, peak cgroup usage ${peak_mb} MB, oom kills $(( oom_after - oom_before ))"

[ "$status" -eq 0 ] || { echo "FAIL: spillway exited with ${status}"; echo "$output" | tail -20; exit 1; }
[ "$oom_after" = "$oom_before" ] || { echo "FAIL: the OOM killer ran"; exit 1; }
grep -q '^experts: ' <<<"$output" || { echo "FAIL: the expert tier is not on"; exit 1; }
got=$(grep -o '"tokens":\[[0-9,]*\]' <<<"$output")
[ "$got" = "$reference" ] || { echo "FAIL: tokens $got, unlimited run $reference"; exit 1; }
json=$(grep '^{' <<<"$output")
python3 - "$json" <<'PY' || { echo "FAIL: expert counters"; exit 1; }
import json, sys
e = json.loads(sys.argv[1])["experts"]
hit, miss = e["moe_expert_requests_total"]["hit"], e["moe_expert_requests_total"]["miss"]
per_expert = 3 * 1024 * 768 * 2
asked = (hit + miss) * per_expert
print(f"expert requests {hit + miss}, hit rate {e['moe_expert_hit_rate']:.3f}, read {e['moe_expert_bytes_read_total'] / 2**20:.1f} MiB"
      f" of {asked / 2**20:.1f} MiB asked for, cache {e['moe_cache_slots']} slots")
assert e["moe_expert_bytes_read_total"] <= (1 - e["moe_expert_hit_rate"]) * asked + 1
PY
echo "PASS"
