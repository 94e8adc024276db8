#!/usr/bin/env bash
# A hybrid model (qwen35: Gated DeltaNet + gated attention) about twice its memory cgroup's
# limit is SERVED with --memory-budget auto: the plan streams the layers that do not fit
# (recurrent-state slots and snapshots are in it), the server answers a completion with the
# text of an unlimited `spillway run`, a second turn resumes from a recurrent-state snapshot
# (cached_tokens > 0) with the tokens of an uncached run, and the kernel never OOM-kills it.
# The cgroup plumbing is cli/cgroup_test_lib.sh (shared by the cgroup tests); skipped (exit
# 77) where memory cgroups (v1) are not writable or that helper is missing.
# Usage: serve_hybrid_in_memory_limited_cgroup.sh SPILLWAY_BINARY WORK_DIR
set -euo pipefail
spillway=$1
work=$2

lib="$(dirname "$0")/cgroup_test_lib.sh"
[ -f "$lib" ] || { echo "SKIP: $lib is missing (the shared cgroup helper)"; exit 77; }
source "$lib"
cgroup_require_v1

# 320 MiB: a hybrid plan also reserves recurrent-state slots and snapshots, and under ASan
# the server itself holds ~70 MiB at start; 256 MiB left no room for one streamed layer.
limit_mb=320
model=$work/cgroup-hybrid-model-$$.gguf
log=$work/cgroup-hybrid-serve-$$.log
cgroup_cleanup_file "$model"
cgroup_cleanup_file "$log"

# ~700 MB of F16 weights: 28 layers (21 Gated DeltaNet, 7 gated attention) of ~25 MB;
# DeltaNet heads of 64 keep the recurrent state (and the slots and snapshots the plan
# reserves) at 5 MiB per sequence.
"$spillway" make-demo-model --out "$model" --arch qwen35 --layers 28 --dim 1024 --vocab 4096 \
  --ssm-head-dim 64 --context 512 >/dev/null
model_mb=$(( $(stat -c %s "$model") / 1048576 ))
echo "model ${model_mb} MB, cgroup limit ${limit_mb} MB"
[ "$model_mb" -ge $(( 2 * limit_mb * 9 / 10 )) ] || { echo "FAIL: model is not ~2x the limit"; exit 1; }

prompt="Once upon a time there was a quiet harbor where the river met the stone lantern by the old maple garden"
run_text() {  # the unlimited reference: greedy text of a raw-prompt completion
  "$spillway" run --model "$model" --prompt "$1" --max-tokens 8 --temperature 0 --threads 2 --json 2>/dev/null |
    grep '^{' | jq -r .text
}
reference=$(run_text "$prompt")

cgroup=$(cgroup_create hybrid "$limit_mb")
cgroup_cleanup_dir "$cgroup"
oom_before=$(cgroup_oom_kills "$cgroup")
cgroup_start_server "$cgroup" "$log" "$spillway" serve --model "$model" --port 0 --threads 2 --max-running 2 \
  --max-batch-tokens 128 --ctx-size 512 --memory-budget auto --log-format json
server=$CGROUP_SERVER_PID
port=$CGROUP_SERVER_PORT
grep -o '"message":"\(memory\|residency budget\|layers\|streaming\)[^"]*"' "$log" || true

complete() {  # prints the completion's "text<TAB>cached_tokens"
  curl -sf "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
    -d "$(jq -n --arg m "$model_id" --arg p "$1" '{model: $m, prompt: $p, max_tokens: 8, temperature: 0}')" |
    jq -r '[.choices[0].text, (.usage.prompt_tokens_details.cached_tokens // 0 | tostring)] | join("\t")'
}
model_id=$(curl -sf "http://127.0.0.1:$port/v1/models" | jq -r '.data[0].id')
first=$(complete "$prompt")
second_prompt="$prompt${first%%$'\t'*} and then the signal"
second=$(complete "$second_prompt")
metrics=$(curl -sf "http://127.0.0.1:$port/metrics")
kill -TERM "$server"
wait "$server" || true
peak_mb=$(cgroup_peak_mb "$cgroup")
oom_after=$(cgroup_oom_kills "$cgroup")
echo "peak cgroup usage ${peak_mb} MB, oom kills $(( oom_after - oom_before )), second turn cached ${second##*$'\t'} tokens"

[ "$oom_after" = "$oom_before" ] || { echo "FAIL: the OOM killer ran"; exit 1; }
streamed=$(grep -E '^spillway_streamed_layers ' <<<"$metrics" | awk '{print int($2)}')
[ "${streamed:-0}" -gt 0 ] || { echo "FAIL: nothing was streamed (spillway_streamed_layers ${streamed:-none})"; exit 1; }
[ "${first%%$'\t'*}" = "$reference" ] || { echo "FAIL: served '${first%%$'\t'*}', unlimited run '$reference'"; exit 1; }
[ "${second##*$'\t'}" -gt 0 ] || { echo "FAIL: the second turn hit no state snapshot"; exit 1; }
[ "${second%%$'\t'*}" = "$(run_text "$second_prompt")" ] || { echo "FAIL: second turn differs from an uncached run"; exit 1; }
echo "PASS"
