#!/usr/bin/env bash
# Brings deploy/compose.yaml up with podman-compose and checks the stack works together:
# Spillway serves under compose's settings (read-only root, tmpfs /tmp, cap_drop ALL,
# no-new-privileges, the compose healthcheck), Prometheus scrapes it by service name over the
# compose network and loads the alert rules, and `stop` drains Spillway with SIGTERM to exit
# code 0. Then removes the stack (containers, volumes, network).
#
# Usage: deploy/compose-smoke.sh [SPILLWAY_IMAGE]     (default localhost/spillway:latest,
#                                                      made by deploy/build-image.sh)
#
# Offline machines: when the Prometheus image cannot be pulled, a stand-in is built from the
# Debian base of build-image.sh with Debian's `prometheus` package (same flags, same config);
# Grafana has no Debian package, so without a registry it is left out, and the dashboard is
# checked by the e2e suite instead (tests/e2e/prometheus_scrape.py runs its queries).
# Installs podman, podman-compose, runc, buildah and the network's DNS plugin from Debian when
# missing. Needs root.
set -euo pipefail
cd "$(dirname "$0")"
image=${1:-localhost/spillway:latest}
project=spillway-smoke
base=localhost/spillway-base:bookworm
prometheus_upstream=docker.io/prom/prometheus:v2.53.0
grafana_upstream=docker.io/grafana/grafana-oss:11.1.0
prometheus_standin=localhost/spillway-prometheus:debian

smoke_name=compose-smoke
work=$(mktemp -d "${TMPDIR:-/tmp}/spillway-compose-$$-XXXX")
# shellcheck source=deploy/podman-common.sh
. ./podman-common.sh

install_missing podman podman-compose runc curl buildah
# Compose services find each other by name through the network's DNS: aardvark-dns with
# netavark, the dnsname plugin with CNI (Debian 12's podman default).
if [ "$(podman info --format '{{.Host.NetworkBackend}}')" = netavark ]; then
  install_missing aardvark-dns
else
  install_missing golang-github-containernetworking-plugin-dnsname
fi
podman image exists "$image" || fail "no image $image: run deploy/build-image.sh first"

compose() { podman-compose -p "$project" -f compose.yaml "$@"; }
cleanup() {
  compose down -v >"$work/down.log" 2>&1 || true
  podman network rm "${project}_default" >/dev/null 2>&1 || true  # podman-compose 1.0 leaves it
  rm -rf "$work"
}
trap cleanup EXIT

use_working_container_runtime "$image"

# --- images --------------------------------------------------------------------------------
services=(spillway prometheus grafana)
export SPILLWAY_IMAGE=$image
if ! timeout 60 podman pull -q "$prometheus_upstream" >/dev/null 2>&1; then
  if ! podman image exists "$prometheus_standin"; then
    podman image exists "$base" || fail "no registry and no $base: run deploy/build-image.sh first"
    log "no image registry: building $prometheus_standin from $base with Debian's prometheus"
    ctr=$(buildah from "$base")
    buildah run --isolation=chroot "$ctr" -- sh -c 'apt-get update -q >/dev/null &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus >/dev/null &&
      apt-get clean && rm -rf /var/lib/apt/lists/* &&
      mkdir -p /prometheus && chown prometheus:prometheus /prometheus' >&2
    buildah config --entrypoint '["/usr/bin/prometheus"]' --cmd '' --user prometheus \
      --workingdir /prometheus --port 9090 "$ctr"
    buildah commit --rm "$ctr" "$prometheus_standin" >/dev/null
  fi
  export PROMETHEUS_IMAGE=$prometheus_standin
  if ! timeout 60 podman pull -q "$grafana_upstream" >/dev/null 2>&1; then
    log "no image registry: Grafana left out (no Debian package); the e2e suite runs the dashboard's queries"
    services=(spillway prometheus)
  fi
fi

api_port=$(free_port)
prometheus_port=$(free_port)
grafana_port=$(free_port)
export SPILLWAY_PUBLISH=127.0.0.1:$api_port PROMETHEUS_PUBLISH=127.0.0.1:$prometheus_port
export GRAFANA_PUBLISH=127.0.0.1:$grafana_port
# An empty models directory: the server makes and serves its demo model under /tmp.
mkdir -p "$work/models"
export SPILLWAY_MODELS_DIR=$work/models

# --- up ------------------------------------------------------------------------------------
log "podman-compose up: ${services[*]} (API on :$api_port, Prometheus on :$prometheus_port)"
compose up -d "${services[@]}" >"$work/up.log" 2>&1 || { tail -n 30 "$work/up.log" >&2; fail "compose up"; }
service_container() {
  podman ps -a --filter "label=io.podman.compose.project=$project" \
    --filter "label=com.docker.compose.service=$1" --format '{{.Names}}' | head -n1
}
spillway_ctr=$(service_container spillway)
[ -n "$spillway_ctr" ] || fail "no spillway container in project $project: $(podman ps -a --format '{{.Names}}')"

spillway_healthy() {  # fails the script at once when the container is restarting in a loop
  local restarts
  restarts=$(podman inspect "$spillway_ctr" --format '{{.RestartCount}}' 2>/dev/null || echo 0)
  if [ "${restarts:-0}" -gt 2 ]; then
    podman logs --tail 10 "$spillway_ctr" >&2 || true
    fail "Spillway restarted $restarts times"
  fi
  curl -fsS "http://127.0.0.1:$api_port/health"
}
if ! wait_for_quietly 300 spillway_healthy; then
  podman logs --tail 20 "$spillway_ctr" >&2 || true
  fail "Spillway never answered /health 200"
fi
log "Spillway ready in container $spillway_ctr"

[ "$(podman inspect "$spillway_ctr" --format '{{.HostConfig.ReadonlyRootfs}}')" = true ] || fail "root filesystem is not read-only"
check_container_hardening "$spillway_ctr"
podman exec "$spillway_ctr" grep -q '^tmpfs /tmp tmpfs' /proc/mounts || fail "/tmp is not a tmpfs"
podman healthcheck run "$spillway_ctr" >/dev/null 2>&1 || fail "the compose healthcheck command fails"
log "container: read-only root, tmpfs /tmp, uid 10001, no capabilities, no-new-privileges, healthcheck passes"

model=$(check_chat_completion "http://127.0.0.1:$api_port")
log "chat completion from model $model through the published port"

# Prometheus reaches Spillway by its service name over the compose network.
prom=http://127.0.0.1:$prometheus_port
scraped() {
  grep -q '"value"' <<<"$(curl -fsS "$prom/api/v1/query" --data-urlencode 'query=up{job="spillway"} == 1')" &&
    grep -q '"value"' <<<"$(curl -fsS "$prom/api/v1/query" --data-urlencode 'query=count({__name__=~"spillway_.+"}) > 0')"
}
if ! wait_for_quietly 120 scraped; then
  fail "Prometheus never scraped Spillway; its targets: $(curl -s "$prom/api/v1/targets" | head -c 1500)"
fi
series=$(curl -fsS "$prom/api/v1/label/__name__/values" | python3 -c 'import json,sys; print(sum(n.startswith("spillway_") for n in json.load(sys.stdin)["data"]))')
[ "$series" -gt 10 ] || fail "only $series spillway_* metric names in Prometheus"
rules=$(curl -fsS "$prom/api/v1/rules" | python3 -c 'import json,sys; print(sum(len(g["rules"]) for g in json.load(sys.stdin)["data"]["groups"]))')
[ "$rules" -gt 0 ] || fail "Prometheus loaded no alert rules"
log "Prometheus ($(podman inspect --format '{{.ImageName}}' "$(service_container prometheus)")) scrapes spillway:8080: $series spillway_* metric names, $rules alert rules loaded"

# --- stop: SIGTERM, drain, exit 0 -----------------------------------------------------------
compose stop spillway >"$work/stop.log" 2>&1 || { tail -n 20 "$work/stop.log" >&2; fail "compose stop"; }
check_drained_exit "$spillway_ctr"
log "compose stop: Spillway drained and exited 0"
log "PASS"
