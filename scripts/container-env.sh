#!/usr/bin/env bash
# Prepares the container engines cordon's container backends are tested against, without
# reaching any registry:
#   - installs Debian's docker.io (dockerd, containerd, runc) and busybox-static when missing;
#   - starts the standard containerd (/run/containerd/containerd.sock) when it does not
#     answer, then dockerd on that same containerd when it does not answer;
#   - builds the test image from the host's static busybox (`docker import`) and imports
#     it into containerd's `cordon` namespace too.
# Prints the image name on stdout. Idempotent; logs go to /var/log/cordon-*.log.
# Usage: scripts/container-env.sh [IMAGE]   (default cordon-test/busybox:1)
set -euo pipefail
image=${1:-${CORDON_TEST_IMAGE:-cordon-test/busybox:1}}
ctr_sock=/run/containerd/containerd.sock
docker_sock=/var/run/docker.sock
ns=cordon
log() { echo "container-env: $*" >&2; }
# ref NAME: NAME as containerd stores it (docker.io/ prefix, library/ for one-part names).
ref() {
  local n=$1
  case "${n%%/*}" in *.*|*:*|localhost) ;; *) [[ $n == */* ]] || n=library/$n; n=docker.io/$n ;; esac
  echo "$n"
}

if [ "$(id -u)" != 0 ]; then
  log "needs root (starts containerd and dockerd)"
  exit 1
fi
missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v containerd >/dev/null 2>&1 || missing+=(containerd)
[ -x /bin/busybox ] && /bin/busybox --list >/dev/null 2>&1 || missing+=(busybox-static)
if ((${#missing[@]})); then
  log "installing ${missing[*]} from Debian"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  # policy-rc.d keeps the package scripts from starting services; we start them below.
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# wait_for CMD...: retries CMD for up to 30 s.
wait_for() {
  for _ in $(seq 300); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  return 1
}

if ! ctr --address "$ctr_sock" version >/dev/null 2>&1; then
  log "starting containerd"
  setsid containerd --address "$ctr_sock" </dev/null >>/var/log/cordon-containerd.log 2>&1 &
  wait_for ctr --address "$ctr_sock" version || { log "containerd did not start; see /var/log/cordon-containerd.log"; exit 1; }
fi
if ! docker -H "unix://$docker_sock" version >/dev/null 2>&1; then
  log "starting dockerd on $ctr_sock"
  setsid dockerd --containerd="$ctr_sock" -H "unix://$docker_sock" </dev/null >>/var/log/cordon-dockerd.log 2>&1 &
  wait_for docker -H "unix://$docker_sock" version || { log "dockerd did not start; see /var/log/cordon-dockerd.log"; exit 1; }
fi

# The test image: /bin/busybox plus one symlink per applet, nothing else (no shell
# besides busybox's, no libc, no /etc beyond what the engines add).
if ! docker image inspect "$image" >/dev/null 2>&1; then
  log "building $image from $(readlink -f /bin/busybox)"
  root=$(mktemp -d)
  trap 'rm -rf "$root"' EXIT
  mkdir -p "$root/bin" "$root/tmp" "$root/etc"
  cp /bin/busybox "$root/bin/busybox"
  for a in $(/bin/busybox --list); do
    [ "$a" = busybox ] || ln -s busybox "$root/bin/$a"
  done
  tar --numeric-owner --owner=0 --group=0 -C "$root" -c . |
    docker import -c 'ENV PATH=/bin' -m 'cordon test image (Debian busybox-static)' - "$image" >/dev/null
fi
if ! ctr --address "$ctr_sock" -n "$ns" images check "name==$(ref "$image")" 2>/dev/null | grep complete >/dev/null; then
  log "importing $image into containerd namespace $ns"
  docker save "$image" | ctr --address "$ctr_sock" -n "$ns" images import --all-platforms - >/dev/null
fi
echo "$image"
