#!/usr/bin/env bash
# Builds the Spillway container image (deploy/Dockerfile) with buildah or podman, then runs
# it once against the demo model and checks the container contract: non-root user, /health,
# a chat completion, /metrics, and a SIGTERM drain that exits 0.
#
# Usage: deploy/build-image.sh [--tag NAME] [--no-smoke] [--rebuild-base]
#
# The base is Debian 12. When no image registry answers, it is made locally with debootstrap
# from the Debian mirror this machine's apt already uses (read from /etc/apt at run time;
# override with SPILLWAY_DEBIAN_MIRROR=URL) and imported as localhost/spillway-base:bookworm.
# Needs root (or a working rootless buildah). Installs buildah and debootstrap from Debian
# when missing. Not part of scripts/test.sh: it compiles Spillway a second time.
set -euo pipefail
cd "$(dirname "$0")/.."

tag=localhost/spillway:latest
base=localhost/spillway-base:bookworm
smoke=1
rebuild_base=0
while [ $# -gt 0 ]; do
  case "$1" in
    --tag) tag=$2; shift 2 ;;
    --no-smoke) smoke=0; shift ;;
    --rebuild-base) rebuild_base=1; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done

log() { printf '[build-image] %s\n' "$*" >&2; }
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

need=()
command -v buildah >/dev/null || need+=(buildah)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v curl >/dev/null || need+=(curl)
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >&2
fi
# buildah is the builder; podman builds through the same library and is used when buildah is
# missing but podman is present.
builder=buildah
command -v buildah >/dev/null || builder=podman

# --- the Debian 12 base -------------------------------------------------------------------

# Prints "URI" of the first apt source (deb822 .sources or one-line .list) that serves the
# given suite, e.g. bookworm or bookworm-security.
apt_source_for_suite() {
  local suite=$1 f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk -v suite="$suite" '
      BEGIN { RS = ""; FS = "\n" }
      {
        uris = ""; suites = ""; enabled = 1
        for (i = 1; i <= NF; i++) {
          if ($i ~ /^URIs:/)    { uris = $i;   sub(/^URIs:[ \t]*/, "", uris) }
          if ($i ~ /^Suites:/)  { suites = " " $i " "; sub(/Suites:/, "", suites) }
          if ($i ~ /^Enabled:[ \t]*no/) enabled = 0
        }
        if (enabled && uris != "" && index(suites, " " suite " ") > 0) {
          split(uris, u, /[ \t]+/); print u[1]; exit
        }
      }' "$f"
  done | head -n1
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    awk -v suite="$suite" '$1 == "deb" {
        i = 2; if ($2 ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
        if ($(i + 1) == suite) { print $i; exit } }' "$f"
  done | head -n1
}

base_exists() { $builder inspect --type image "$base" >/dev/null 2>&1; }

make_base_with_debootstrap() {
  local mirror security work rootfs ctr valid_until
  mirror=${SPILLWAY_DEBIAN_MIRROR:-$(apt_source_for_suite bookworm | head -n1)}
  security=$(apt_source_for_suite bookworm-security | head -n1)
  if [ -z "$mirror" ]; then
    echo "no bookworm source in /etc/apt; set SPILLWAY_DEBIAN_MIRROR=URL" >&2
    exit 1
  fi
  work=$(mktemp -d "${TMPDIR:-/tmp}/spillway-base-$$-XXXX")
  rootfs=$work/rootfs
  log "debootstrap bookworm (minbase) from the host's apt mirror into $rootfs"
  $SUDO debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 || {
    tail -n 30 "$work/debootstrap.log" >&2; exit 1; }
  {
    echo "deb $mirror bookworm main"
    echo "deb $mirror bookworm-updates main"
    if [ -n "$security" ]; then echo "deb $security bookworm-security main"; fi
  } | $SUDO tee "$rootfs/etc/apt/sources.list" >/dev/null
  # A snapshot mirror serves Release files past their Valid-Until date; keep the host's
  # setting so apt inside the image accepts what apt outside it accepts.
  valid_until=$(apt-config dump Acquire::Check-Valid-Until | sed -n 's/^Acquire::Check-Valid-Until "\(.*\)";$/\1/p')
  if [ "$valid_until" = "false" ]; then
    echo 'Acquire::Check-Valid-Until "false";' | $SUDO tee "$rootfs/etc/apt/apt.conf.d/99spillway-snapshot" >/dev/null
  fi
  $SUDO chroot "$rootfs" apt-get clean
  $SUDO rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/log/*.log
  $SUDO tar -C "$rootfs" --numeric-owner -cf "$work/rootfs.tar" .
  ctr=$($builder from scratch)
  $builder add "$ctr" "$work/rootfs.tar" / >/dev/null
  $builder config --cmd /bin/bash --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$ctr"
  $builder commit --rm "$ctr" "$base" >/dev/null
  $SUDO rm -rf "$work"
  log "imported $base"
}

if [ "$rebuild_base" = 1 ] && base_exists; then $builder rmi "$base" >/dev/null; fi
if ! base_exists; then
  if timeout 60 $builder pull -q docker.io/library/debian:bookworm-slim >/dev/null 2>&1; then
    $builder tag docker.io/library/debian:bookworm-slim "$base"
    log "pulled debian:bookworm-slim as $base"
  else
    log "no image registry reachable: making the base with debootstrap"
    make_base_with_debootstrap
  fi
fi

# --- the image ----------------------------------------------------------------------------

log "building $tag from deploy/Dockerfile"
build_args=(--build-arg "BASE_IMAGE=$base" --build-arg "JOBS=${JOBS:-$(nproc)}" -f deploy/Dockerfile -t "$tag" .)
if [ "$builder" = buildah ]; then
  # chroot isolation: works where user namespaces or a container runtime are unavailable.
  # docker format: OCI images drop HEALTHCHECK.
  buildah build --isolation=chroot --format docker --layers "${build_args[@]}"
else
  podman build --format docker "${build_args[@]}"
fi
$builder images "$tag"

if [ "$smoke" = 1 ]; then
  exec deploy/smoke-image.sh "$tag"
fi
