#!/usr/bin/env bash
# Runs the Spillway image once and checks the container contract (deploy/build-image.sh
# calls it after building). Uses `buildah run --isolation=chroot`, which needs no container
# runtime (podman's default crun cannot start containers on this project's VMs; runc can, see
# deploy/podman-common.sh) and no Docker engine; chroot isolation shares the host's network,
# so the server is reached on loopback.
#
# Usage: deploy/smoke-image.sh [IMAGE]     (default localhost/spillway:latest)
#
# Checks: the image config (non-root user, entrypoint, HEALTHCHECK, /models volume,
# SPILLWAY_* defaults); the binary's shared libraries resolve; then two runs:
#   1. no SPILLWAY_MODEL: the server builds and serves the demo model under /tmp; /live,
#      /health, the image's HEALTHCHECK command, a chat completion, /metrics; SIGTERM
#      during a streamed completion: /health turns 503, the stream still ends with [DONE],
#      the process exits 0;
#   2. /models mounted read-only with a model made by the image's own `make-demo-model`,
#      served through SPILLWAY_MODEL; SIGTERM exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."
image=${1:-localhost/spillway:latest}
builder=buildah
command -v buildah >/dev/null || { echo "smoke-image.sh needs buildah" >&2; exit 1; }

log() { printf '[smoke-image] %s\n' "$*" >&2; }
fail() { printf '[smoke-image] FAIL: %s\n' "$*" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/spillway-smoke-$$-XXXX")
containers=()
server_job=""
cleanup() {
  if [ -n "$server_job" ] && kill -0 "$server_job" 2>/dev/null; then kill "$server_job" 2>/dev/null || true; fi
  for c in "${containers[@]}"; do $builder rm "$c" >/dev/null 2>&1 || true; done
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# The PID of the first descendant of $1 whose command name is $2.
descendant_named() {
  local root=$1 name=$2
  ps -e -o pid=,ppid=,comm= | awk -v root="$root" -v name="$name" '
    { pid[NR] = $1; ppid[NR] = $2; comm[NR] = $3 }
    END {
      inside[root] = 1; changed = 1
      while (changed) { changed = 0
        for (i = 1; i <= NR; i++) if (inside[ppid[i]] && !inside[pid[i]]) { inside[pid[i]] = 1; changed = 1 } }
      for (i = 1; i <= NR; i++) if (inside[pid[i]] && comm[i] == name && pid[i] != root) { print pid[i]; exit }
    }'
}

wait_http() {  # URL EXPECTED_STATUS SECONDS
  local url=$1 want=$2 deadline=$((SECONDS + $3)) got
  while [ $SECONDS -lt $deadline ]; do
    got=$(curl -s -o /dev/null -w '%{http_code}' "$url" || true)
    [ "$got" = "$want" ] && return 0
    if [ -n "$server_job" ] && ! kill -0 "$server_job" 2>/dev/null; then fail "the server exited; log: $(tail -n 20 "$work/server.log")"; fi
    sleep 0.2
  done
  fail "$url never answered $want (last $got)"
}

# --- image config ----------------------------------------------------------------------
$builder inspect --type image "$image" >"$work/image.json"
# Prints one field of the image's Docker config (Python expression on `c`).
config() { python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["Docker"]["config"]; v='"$1"'; print(v if isinstance(v,str) else json.dumps(v))' "$work/image.json"; }
user=$(config 'c.get("User")')
[ "$user" = "10001:10001" ] || fail "image user is '$user', expected 10001:10001"
entrypoint=$(config 'c.get("Entrypoint")')
[ "$entrypoint" = '["/usr/local/bin/spillway", "serve"]' ] || fail "entrypoint $entrypoint"
healthcheck=$(config 'c.get("Healthcheck")')
grep -q '/health' <<<"$healthcheck" || fail "no HEALTHCHECK on /health: $healthcheck"
grep -q '"/models"' <<<"$(config 'c.get("Volumes")')" || fail "no /models volume"
env_list=$(config 'c.get("Env")')
for want in SPILLWAY_HOST=0.0.0.0 SPILLWAY_PORT=8080 SPILLWAY_DEMO_MODEL=/tmp/; do
  grep -q "\"$want" <<<"$env_list" || fail "image env lacks $want: $env_list"
done
[ "$(config 'c.get("StopSignal")')" = SIGTERM ] || fail "stop signal"
log "image config: user $user, entrypoint $entrypoint, HEALTHCHECK on /health, /models volume"
log "image size: $($builder images --format '{{.Size}}' "$image" | head -n1)"

ctr=$($builder from --pull-never "$image")
containers+=("$ctr")
run_in() { $builder run --isolation=chroot "$@"; }

uid=$(run_in "$ctr" -- id -u)
[ "$uid" = 10001 ] || fail "the container runs as uid $uid"
libraries=$(run_in "$ctr" -- ldd /usr/local/bin/spillway)
if grep -q 'not found' <<<"$libraries"; then fail "unresolved shared libraries: $(grep 'not found' <<<"$libraries")"; fi
if run_in "$ctr" -- sh -c 'command -v g++ || command -v cmake || ls /usr/include/boost' >/dev/null 2>&1; then
  fail "build tools or headers leaked into the runtime stage"
fi
log "runs as uid 10001; all shared libraries resolve; no compilers or headers in the image"

# --- run 1: the demo model, drain on SIGTERM ---------------------------------------------
port=$(free_port)
url=http://127.0.0.1:$port
run_in --env SPILLWAY_HOST=127.0.0.1 --env SPILLWAY_PORT="$port" --env SPILLWAY_DRAIN_TIMEOUT=60 \
  "$ctr" -- /usr/local/bin/spillway serve >"$work/server.log" 2>&1 &
server_job=$!
wait_http "$url/live" 200 60
wait_http "$url/health" 200 300
log "run 1: /live and /health 200 (demo model built and loaded)"

hc=$(config 'c["Healthcheck"]["Test"][-1]')
run_in --env SPILLWAY_PORT="$port" "$ctr" -- /bin/bash -c "$hc" || fail "the image's HEALTHCHECK command failed"
log "run 1: the image's HEALTHCHECK command passes"

body=$(curl -sf "$url/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"model":"spillway-demo","messages":[{"role":"user","content":"Hello"}],"max_completion_tokens":8}') \
  || fail "chat completion failed"
grep -q '"object":"chat.completion"' <<<"$body" || fail "chat completion: $body"
metrics=$(curl -sf "$url/metrics")
grep -q '^spillway_requests_finished_total' <<<"$metrics" || fail "/metrics lacks spillway_requests_finished_total"
grep -q '^vllm:num_requests_waiting' <<<"$metrics" || fail "/metrics lacks vllm:num_requests_waiting"
log "run 1: chat completion and /metrics answer"

curl -sN "$url/v1/completions" -H 'Content-Type: application/json' \
  -d '{"model":"spillway-demo","prompt":"Once upon a time","max_tokens":600,"ignore_eos":true,"stream":true}' \
  >"$work/stream.txt" 2>&1 &
stream_job=$!
deadline=$((SECONDS + 60))
until grep -q '^data: {' "$work/stream.txt" 2>/dev/null; do
  [ $SECONDS -lt $deadline ] || fail "the stream did not start"
  sleep 0.05
done
spillway_pid=$(descendant_named "$server_job" spillway)
[ -n "$spillway_pid" ] || fail "cannot find the spillway process under buildah run ($server_job)"
kill -TERM "$spillway_pid"
health_during_drain=$(curl -s -o /dev/null -w '%{http_code}' "$url/health" || true)
wait "$stream_job" || true
set +e
wait "$server_job"
code=$?
set -e
server_job=""
[ "$code" = 0 ] || fail "exit code $code after SIGTERM; log: $(tail -n 20 "$work/server.log")"
grep -q '^data: \[DONE\]' "$work/stream.txt" || fail "the in-flight stream did not finish: $(tail -c 300 "$work/stream.txt")"
grep -q '"finish_reason":"length"' "$work/stream.txt" || fail "the in-flight stream was cut short"
grep -q 'draining' "$work/server.log" || fail "no draining log line"
log "run 1: SIGTERM during a stream: /health answered $health_during_drain, the stream finished ([DONE]), exit 0"
[ "$health_during_drain" = 503 ] || [ "$health_during_drain" = 000 ] || fail "/health answered $health_during_drain while draining"

# --- run 2: a model on a read-only /models volume -----------------------------------------
models=$work/models
mkdir -p "$models"
chown 10001:10001 "$models"
run_in -v "$models:/models" "$ctr" -- /usr/local/bin/spillway make-demo-model --out /models/tiny.gguf \
  --layers 2 --dim 128 >"$work/make.log" 2>&1 || fail "make-demo-model in the container: $(tail -n 5 "$work/make.log")"
port=$(free_port)
url=http://127.0.0.1:$port
run_in -v "$models:/models:ro" --env SPILLWAY_MODEL=/models/tiny.gguf --env SPILLWAY_HOST=127.0.0.1 \
  --env SPILLWAY_PORT="$port" "$ctr" -- /usr/local/bin/spillway serve >"$work/server.log" 2>&1 &
server_job=$!
wait_http "$url/health" 200 300
grep -q '"id":"tiny"' <<<"$(curl -sf "$url/v1/models")" || fail "/v1/models does not list tiny: $(curl -s "$url/v1/models")"
completion=$(curl -sf "$url/v1/completions" -H 'Content-Type: application/json' \
  -d '{"model":"tiny","prompt":"Hello","max_tokens":4}') || fail "completion on tiny"
grep -q '"text_completion"' <<<"$completion" || fail "completion on tiny: $completion"
spillway_pid=$(descendant_named "$server_job" spillway)
kill -TERM "$spillway_pid"
set +e
wait "$server_job"
code=$?
set -e
server_job=""
[ "$code" = 0 ] || fail "run 2: exit code $code after SIGTERM"
log "run 2: /models mounted read-only, SPILLWAY_MODEL=/models/tiny.gguf served as 'tiny', SIGTERM exit 0"
log "PASS"
