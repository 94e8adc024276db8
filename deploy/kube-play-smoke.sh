#!/usr/bin/env bash
# Runs the pod of deploy/k8s (rendered by `kubectl kustomize`) with `podman kube play` and
# checks that the Deployment's pod spec works as written: the restricted security context
# (uid 10001, no capabilities, no privilege escalation, read-only root), the emptyDir /tmp,
# the read-only model volume (its PersistentVolumeClaim becomes an empty podman volume, so
# the server makes and serves its demo model), SPILLWAY_THREADS from limits.cpu, /health and
# /live on the pod's address, a chat completion, and a stop within the pod's
# terminationGracePeriodSeconds that drains to exit code 0. Then removes the pod and volume.
#
# Usage: deploy/kube-play-smoke.sh [SPILLWAY_IMAGE]   (default localhost/spillway:latest,
#                                                      made by deploy/build-image.sh)
#
# What this is not: a cluster. podman plays only the PersistentVolumeClaim and the Deployment
# (Service, HPA, PodDisruptionBudget and the Inference Extension objects have no podman
# equivalent; tests/deploy/manifests.test.mjs schema-checks them), and it does not run the
# kubelet's probes (podman 4.3 turns an httpGet probe into `curl` inside the container, which
# the image does not have, and cannot resolve a named port), so this script calls the probe
# paths itself. preStop is not run either. Installs podman and runc when missing; needs a
# kubectl of 1.21 or later.
set -euo pipefail
cd "$(dirname "$0")/.."
image=${1:-localhost/spillway:latest}

smoke_name=kube-play-smoke
work=$(mktemp -d "${TMPDIR:-/tmp}/spillway-kube-$$-XXXX")
# shellcheck source=deploy/podman-common.sh
. deploy/podman-common.sh

install_missing podman runc curl
# Debian 12's kubectl (kubernetes-client 1.20) predates kustomize's `labels:` field that
# deploy/k8s uses, so kubectl must come from elsewhere (Kubernetes' own packages).
command -v kubectl >/dev/null || fail "needs kubectl 1.21 or later (kubectl kustomize with labels:) on PATH"
podman image exists "$image" || fail "no image $image: run deploy/build-image.sh first"

# The pod's objects, with the image to test; prints what the checks compare against.
kubectl kustomize deploy/k8s >"$work/rendered.yaml"
read -r grace cpu_limit claim < <(python3 - "$work/rendered.yaml" "$work/play.yaml" "$image" <<'EOF'
import sys, yaml
rendered, played, image = sys.argv[1:]
docs = [d for d in yaml.safe_load_all(open(rendered)) if d and d["kind"] in ("PersistentVolumeClaim", "Deployment")]
pod = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]
spillway = next(c for c in pod["containers"] if c["name"] == "spillway")
spillway["image"] = image
yaml.safe_dump_all(docs, open(played, "w"))
claim = next(v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"] if "persistentVolumeClaim" in v)
print(pod["terminationGracePeriodSeconds"], spillway["resources"]["limits"]["cpu"], claim)
EOF
)

cleanup() {
  podman kube down "$work/play.yaml" >/dev/null 2>&1 || true
  podman volume rm -f "$claim" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

use_working_container_runtime "$image"

log "podman kube play: the Deployment's pod and its volume claim $claim"
podman kube play "$work/play.yaml" >"$work/play.log" 2>&1 || { tail -n 20 "$work/play.log" >&2; fail "kube play"; }
pod=$(podman pod ps --filter "label=app.kubernetes.io/name=spillway" --format '{{.Name}}' | head -n1)
[ -n "$pod" ] || fail "no spillway pod: $(podman pod ps)"
ctr=${pod}-spillway
infra=$(podman pod inspect "$pod" --format '{{.InfraContainerID}}')
address=$(podman inspect "$infra" --format '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' | head -c 64)
[ -n "$address" ] || fail "the pod has no address"
base=http://$address:8080

if ! wait_for_quietly 300 curl -fsS "$base/health"; then
  podman logs --tail 20 "$ctr" >&2 || true
  fail "the pod never answered /health 200 at $base"
fi
curl -fsS "$base/live" >/dev/null || fail "/live"
log "pod $pod ready at $base: /health and /live answer 200"

[ "$(podman inspect "$ctr" --format '{{.HostConfig.ReadonlyRootfs}}')" = true ] || fail "root filesystem is not read-only"
check_container_hardening "$ctr"
podman exec "$ctr" grep -q ' /models [^ ]* ro[, ]' /proc/mounts || fail "/models is not mounted read-only"
threads=$(podman exec "$ctr" printenv SPILLWAY_THREADS || true)
[ "$threads" = "$cpu_limit" ] || fail "SPILLWAY_THREADS is '$threads', expected limits.cpu $cpu_limit"
log "container: uid 10001, no capabilities, no privilege escalation, read-only root and /models, writable /tmp, SPILLWAY_THREADS=$threads"

model=$(check_chat_completion "$base")
log "chat completion from model $model"

# The kubelet sends SIGTERM and waits terminationGracePeriodSeconds before SIGKILL.
podman pod stop -t "$grace" "$pod" >/dev/null || fail "pod stop"
check_drained_exit "$ctr"
log "pod stop (grace ${grace}s): Spillway drained and exited 0"
log "PASS"
