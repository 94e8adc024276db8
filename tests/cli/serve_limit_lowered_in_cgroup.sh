#!/usr/bin/env bash
# The cgroup memory limit lowered while streams run (issue #20): `spillway serve
# --memory-budget auto` starts in a cgroup v1 whose limit holds the whole model resident;
# while 3 greedy streams decode, the limit is lowered toward 65% of the model's size, in steps
# that follow the server's memory down (each 7% above what it holds: cgroup v1 OOM-kills
# at once when the limit goes under memory it cannot reclaim). The server must shed resident
# layers (spillway_residency_shed_total > 0),
# never be OOM-killed, finish every stream, and give each the tokens of an unlimited `spillway
# run` (greedy); afterwards a request still succeeds under the low limit.
# Skipped (exit 77) where memory cgroups (v1) are not writable.
# Usage: serve_limit_lowered_in_cgroup.sh SPILLWAY_BINARY WORK_DIR
set -euo pipefail
spillway=$1
work=$2
source "$(dirname "$0")/cgroup_test_lib.sh"
cgroup_require_v1

model=$work/cgroup-lowered-model-$$.gguf
log=$work/cgroup-lowered-serve-$$.log
cgroup_cleanup_file "$model"
cgroup_cleanup_file "$log"
# ~300 MB of F16 weights: 12 layers of ~24 MB, embeddings and output ~16 MB.
"$spillway" make-demo-model --out "$model" --layers 12 --dim 1024 --ff 2816 --heads 16 \
  --kv-heads 8 --vocab 4096 --context 512 >/dev/null
model_mb=$(( $(stat -c %s "$model") / 1048576 ))
start_mb=$(( model_mb * 2 + 128 ))
low_mb=$(( model_mb * 65 / 100 ))
echo "model ${model_mb} MB, cgroup limit ${start_mb} MB lowered to ${low_mb} MB mid-generation"

tokens=96
prompts=("Once upon a time there was a little dog" "The sun was shining on the garden" "A boy and a girl played with a red ball")
declare -a reference
for i in "${!prompts[@]}"; do
  reference[$i]=$("$spillway" run --model "$model" --prompt "${prompts[$i]}" --max-tokens $tokens --temperature 0 \
    --threads 2 --json 2>/dev/null | grep '^{' | jq -r .text)
done

cgroup=$(cgroup_create lowered "$start_mb")
cgroup_cleanup_dir "$cgroup"
oom_before=$(cgroup_oom_kills "$cgroup")
cgroup_start_server "$cgroup" "$log" "$spillway" serve --model "$model" --port 0 --threads 2 --max-running 4 \
  --ctx-size 512 --memory-budget auto --log-format json
server=$CGROUP_SERVER_PID
port=$CGROUP_SERVER_PORT
metric() { { curl -sf "http://127.0.0.1:$port/metrics" || true; } | awk -v k="$1" '$1 == k {print int($2)}'; }
model_id=$(curl -sf "http://127.0.0.1:$port/v1/models" | jq -r '.data[0].id')
resident_start=$(metric spillway_resident_layers)
echo "resident layers at start: $resident_start"

declare -a outs pids
for i in "${!prompts[@]}"; do
  outs[$i]=$work/cgroup-lowered-$$-$i.json
  cgroup_cleanup_file "${outs[$i]}"
  curl -sf "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
    -d "$(jq -n --arg m "$model_id" --arg p "${prompts[$i]}" --argjson t $tokens \
      '{model: $m, prompt: $p, max_tokens: $t, temperature: 0}')" >"${outs[$i]}" &
  pids[$i]=$!
done
for _ in $(seq 1 400); do  # until every stream decodes
  [ "$(metric spillway_generation_tokens_total)" -ge 3 ] && break
  sleep 0.05
done
echo "generating: $(metric spillway_generation_tokens_total) tokens so far, cgroup usage $(( $(cat "$cgroup/memory.usage_in_bytes") / 1048576 )) MB; lowering the limit"

# What the kernel cannot reclaim (anonymous, shmem, unevictable, kernel memory), MiB.
unreclaimable_mb() {
  local kmem=0
  [ -f "$cgroup/memory.kmem.usage_in_bytes" ] && kmem=$(cat "$cgroup/memory.kmem.usage_in_bytes")
  echo $(( ($(cgroup_stat "$cgroup" total_rss) + $(cgroup_stat "$cgroup" total_shmem) +
            $(cgroup_stat "$cgroup" total_unevictable) + kmem) / 1048576 ))
}
# Each step puts the limit 7% above what the server holds (v1 OOM-kills a cgroup whose
# limit is set under memory it cannot reclaim), so its controller reads available memory
# under the floor and sheds; the next step follows the freed memory down.
# Stops at low_mb, or when the server freed nothing more for 20 s (e.g. under ASan, whose
# own memory keeps it above low_mb); it must get at least 100 MiB under its usage at start.
usage_start_mb=$(( $(cat "$cgroup/memory.usage_in_bytes") / 1048576 ))
lowered_at=$(date +%s.%N)
limit=$start_mb
deadline=$(( $(date +%s) + 120 ))
last_progress=$(date +%s)
while [ "$limit" -gt "$low_mb" ] && [ "$(date +%s)" -lt "$deadline" ] && [ $(( $(date +%s) - last_progress )) -lt 20 ]; do
  held=$(unreclaimable_mb)
  margin=$(( limit * 7 / 100 ))  # under the server's floor (10% of the limit): it sheds
  next=$(( held + margin > limit - 32 ? held + margin : limit - 32 ))  # 32 MiB at most
  next=$(( next > low_mb ? next : low_mb ))
  if [ "$next" -lt "$limit" ] && echo $(( next * 1048576 )) > "$cgroup/memory.limit_in_bytes" 2>/dev/null; then
    [ $(( limit - next )) -ge 32 ] || echo "  $(echo "$(date +%s.%N) - $lowered_at" | bc | cut -c1-5) s: limit ${next} MB, the server holds ${held} MB"
    limit=$next
    last_progress=$(date +%s)
  fi
  sleep 0.2
done
echo "limit ${limit} MB after $(echo "$(date +%s.%N) - $lowered_at" | bc) s; streams done: $(metric spillway_generation_tokens_total) tokens"
status=0
for i in "${!prompts[@]}"; do wait "${pids[$i]}" || status=1; done
after=$(curl -sf "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
  -d "$(jq -n --arg m "$model_id" '{model: $m, prompt: "One more", max_tokens: 8, temperature: 0}')" || true) 
after=$(jq -r '.choices[0].finish_reason' <<<"$after" 2>/dev/null || true)
shed=$(metric spillway_residency_shed_total)
resident_end=$(metric spillway_resident_layers)
kill -TERM "$server" 2>/dev/null || true
server_status=0
wait "$server" || server_status=$?
echo "server exit status ${server_status}: $(tail -1 "$log" | cut -c1-200)"
oom_after=$(cgroup_oom_kills "$cgroup")
echo "shed ${shed} layers (resident ${resident_start} -> ${resident_end}), peak cgroup usage $(cgroup_peak_mb "$cgroup") MB, oom kills $(( oom_after - oom_before ))"
grep -o '"message":"[^"]*shed[^"]*"[^}]*' "$log" | head -5 || true

[ "$oom_after" = "$oom_before" ] || { echo "FAIL: the OOM killer ran"; tail -5 "$log"; exit 1; }
[ "$server_status" -eq 0 ] || { echo "FAIL: the server exited with ${server_status}"; exit 1; }
[ "$limit" -le $(( usage_start_mb - 100 )) ] || {
  echo "FAIL: the limit could not be lowered below ${limit} MB (usage at start ${usage_start_mb} MB; no shed?)"; exit 1; }
[ "$status" -eq 0 ] || { echo "FAIL: a request failed"; exit 1; }
[ "${shed:-0}" -gt 0 ] || { echo "FAIL: nothing was shed"; exit 1; }
grep -q '"message":"memory pressure: resident weights shed"' "$log" || {
  echo "FAIL: the server shed layers but did not log it"; exit 1; }
for i in "${!prompts[@]}"; do
  got=$(jq -r '.choices[0].text' "${outs[$i]}")
  [ "$got" = "${reference[$i]}" ] || { echo "FAIL: stream $i served '$got', unlimited run '${reference[$i]}'"; exit 1; }
done
[ "$after" = "length" ] || [ "$after" = "stop" ] || { echo "FAIL: a request after the lowering did not complete ($after)"; exit 1; }
echo "PASS"
