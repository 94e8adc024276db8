#!/usr/bin/env bash
# Issue #21, Done-when (a): page cache of the model file left in a memory cgroup by an
# earlier reader (the file read twice inside the cgroup first, so most of it is on the
# active list) is reclaimable: `spillway serve --memory-budget auto` in that cgroup gets an
# auto budget of what the limit allows (the limit less the pressure floor, 10% of it, and
# what the process holds at start), not the limit less the cache, and the server starts
# and answers a completion. Before the fix the budget was limit - (usage - inactive_file).
# Skipped (exit 77) where memory cgroups (v1) are not writable.
# Usage: run_with_page_cache_in_cgroup.sh SPILLWAY_BINARY WORK_DIR
set -euo pipefail
spillway=$1
work=$2
source "$(dirname "$0")/cgroup_test_lib.sh"
cgroup_require_v1

limit_mb=320
model=$work/cgroup-cache-model-$$.gguf
log=$work/cgroup-cache-serve-$$.log
cgroup_cleanup_file "$model"
cgroup_cleanup_file "$log"

# ~200 MB of F16 weights: 8 layers of ~23 MB, embeddings and output ~16 MB.
"$spillway" make-demo-model --out "$model" --layers 8 --dim 1024 --ff 2816 --heads 16 \
  --kv-heads 8 --vocab 4096 --context 512 >/dev/null
model_mb=$(( $(stat -c %s "$model") / 1048576 ))

cgroup=$(cgroup_create cache "$limit_mb")
cgroup_cleanup_dir "$cgroup"
oom_before=$(cgroup_oom_kills "$cgroup")
# An earlier reader in the same cgroup: the file's pages are charged here (they are charged
# to whoever reads them first, so out of the cache they go first).
cgroup_evict_file "$model"
cgroup_run "$cgroup" sh -c 'cat "$1" > /dev/null; cat "$1" > /dev/null' _ "$model"
cache_mb=$(( $(cgroup_stat "$cgroup" total_cache) / 1048576 ))
active_mb=$(( $(cgroup_stat "$cgroup" total_active_file) / 1048576 ))
echo "model ${model_mb} MB, cgroup limit ${limit_mb} MB; page cache in the cgroup ${cache_mb} MB (${active_mb} MB active)"
[ "$cache_mb" -ge $(( model_mb * 3 / 4 )) ] ||
  { echo "FAIL: the setup did not leave the model in the cgroup's page cache"; exit 1; }

cgroup_run "$cgroup" "$spillway" serve --model "$model" --host 127.0.0.1 --port 0 --threads 2 \
  --ctx-size 256 --model-id cache-test --memory-budget auto >"$log" 2>&1 &
server=$!
cgroup_cleanup_pid "$server"
port=
for _ in $(seq 1 240); do
  port=$(grep -oE 'listening .*port=[0-9]+' "$log" | grep -oE '[0-9]+$' || true)
  [ -n "$port" ] && break
  kill -0 "$server" 2>/dev/null || break
  sleep 0.25
done
[ -n "$port" ] || { echo "FAIL: the server did not listen"; tail -20 "$log"; exit 1; }
# The model loads behind /health (503 until then).
health=$log.health
cgroup_cleanup_file "$health"
code=
for _ in $(seq 1 240); do
  code=$(curl -s -o "$health" -w '%{http_code}' "http://127.0.0.1:${port}/health" || true)
  [ "$code" = 200 ] && break
  kill -0 "$server" 2>/dev/null || break
  sleep 0.5
done
grep -E '(memory:|residency budget|layers:|streaming:)' "$log" | sed 's/^.*\] //' || true
[ "$code" = 200 ] || { echo "FAIL: the server did not start (/health ${code})"; tail -20 "$log"; exit 1; }

budget_mb=$(grep -oE 'residency budget [0-9.]+ MiB' "$log" | grep -oE '[0-9]+' | head -1)
# What the cgroup held besides the cache when the server measured it: the server itself
# (~20 MiB, ~70 MiB under ASan). A probe that counted the cache as used would say more than
# the cache's size here.
unreclaimable_mb=$(grep -oE '[0-9.]+ MiB unreclaimable' "$log" | grep -oE '^[0-9]+' | head -1)
[ -n "$unreclaimable_mb" ] && [ "$unreclaimable_mb" -lt $(( cache_mb / 2 )) ] ||
  { echo "FAIL: ${unreclaimable_mb:-?} MiB unreclaimable with ${cache_mb} MB of page cache"; exit 1; }
# What the limit allows: the limit less the 10% floor and less that (8 MiB of rounding).
want_mb=$(( limit_mb * 9 / 10 - unreclaimable_mb - 8 ))
echo "auto budget ${budget_mb} MiB (at least ${want_mb} MiB expected; the cache would leave $(( limit_mb - cache_mb )))"
[ "$budget_mb" -ge "$want_mb" ] || { echo "FAIL: the page cache shrank the auto budget"; exit 1; }
reply=$(curl -s --max-time 120 "http://127.0.0.1:${port}/v1/completions" -H 'Content-Type: application/json' \
  -d '{"model": "cache-test", "prompt": "Once upon a time", "max_tokens": 3, "temperature": 0}')
grep -q '"choices"' <<<"$reply" || { echo "FAIL: no completion: ${reply}"; exit 1; }
kill "$server"
wait "$server" || true
oom_after=$(cgroup_oom_kills "$cgroup")
echo "completion answered; peak cgroup usage $(cgroup_peak_mb "$cgroup") MB, oom kills $(( oom_after - oom_before ))"
[ "$oom_after" = "$oom_before" ] || { echo "FAIL: the OOM killer ran"; exit 1; }
echo "PASS"
