# shellcheck shell=bash disable=SC2154  # smoke_name and work come from the sourcing script
# Helpers shared by deploy/compose-smoke.sh and deploy/kube-play-smoke.sh; sourced, not run.
# The sourcing script sets `smoke_name` (the log prefix) and `work` (a scratch folder it
# removes on exit) before calling anything here.

log() { printf '[%s] %s\n' "$smoke_name" "$*" >&2; }
fail() { printf '[%s] FAIL: %s\n' "$smoke_name" "$*" >&2; exit 1; }

# Installs the Debian packages named (a command or a package name each) that are missing.
install_missing() {
  local need=() item
  for item in "$@"; do
    command -v "$item" >/dev/null || dpkg -s "$item" >/dev/null 2>&1 || need+=("$item")
  done
  if [ ${#need[@]} -gt 0 ]; then
    log "installing ${need[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >&2
  fi
}

# Makes `podman run` work here or fails saying why. Where the default runtime cannot start a
# container (crun cannot set podman's default rlimits, or use hybrid cgroups, as on this
# project's VMs), exports CONTAINERS_CONF pointing at a private config that selects runc with
# explicit rlimits (the host's nofile; nproc 4096, as higher values are refused there).
# The machine's own container config is left alone.
use_working_container_runtime() {
  local image=$1
  if podman run --rm --no-healthcheck --entrypoint /bin/true "$image" >"$work/probe.log" 2>&1; then return 0; fi
  log "podman run fails with the default runtime: $(grep -m1 -i 'error' "$work/probe.log" || tail -n1 "$work/probe.log")"
  cat >"$work/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=$(ulimit -Hn):$(ulimit -Hn)", "nproc=4096:4096"]

[engine]
runtime = "runc"
EOF
  export CONTAINERS_CONF=$work/containers.conf
  podman run --rm --no-healthcheck --entrypoint /bin/true "$image" >"$work/probe.log" 2>&1 ||
    fail "podman run fails with runc and explicit rlimits too: $(tail -n 3 "$work/probe.log")"
  log "using runc with explicit rlimits (nofile $(ulimit -Hn) as the host, nproc 4096)"
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

wait_for_quietly() {  # SECONDS COMMAND...: whether COMMAND succeeded within SECONDS
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 1
  done
}

# Checks the hardening both deployments ask for inside running container $1: uid 10001, no
# capabilities (effective or bounding), no-new-privileges, a read-only root and a writable
# tmpfs or volume at /tmp.
check_container_hardening() {
  local ctr=$1 caps
  [ "$(podman exec "$ctr" id -u)" = 10001 ] || fail "not running as uid 10001"
  caps=$(podman exec "$ctr" grep -E '^Cap(Eff|Bnd):' /proc/1/status | awk '{print $2}' | sort -u)
  [ "$caps" = 0000000000000000 ] || fail "the server holds capabilities: $caps"
  [ "$(podman exec "$ctr" awk '/^NoNewPrivs:/ {print $2}' /proc/1/status)" = 1 ] || fail "no-new-privileges is off"
  if podman exec "$ctr" touch /spillway-write-test 2>/dev/null; then fail "the root filesystem is writable"; fi
  podman exec "$ctr" touch /tmp/spillway-write-test || fail "/tmp is not writable"
}

# A chat completion from the first model of the server at base URL $1; prints the model id.
check_chat_completion() {
  local base=$1 model reply
  model=$(curl -fsS "$base/v1/models" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])') ||
    fail "$base/v1/models"
  reply=$(curl -sS "$base/v1/chat/completions" -H 'Content-Type: application/json' \
    -d "{\"model\":\"$model\",\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}],\"max_tokens\":8}") ||
    fail "chat completion"
  grep -q '"chat.completion"' <<<"$reply" || fail "chat completion reply: $reply"
  echo "$model"
}

# Container $1 has stopped after SIGTERM: exit code 0 and a drain in its log.
check_drained_exit() {
  local ctr=$1 code
  code=$(podman inspect "$ctr" --format '{{.State.ExitCode}}')
  [ "$code" = 0 ] || { podman logs --tail 20 "$ctr" >&2; fail "Spillway exited $code when stopped"; }
  podman logs "$ctr" >"$work/stopped.log" 2>&1 || true
  grep -q '"message":"draining"' "$work/stopped.log" || { tail -n 8 "$work/stopped.log" >&2; fail "no drain in Spillway's log"; }
}
