#!/usr/bin/env bash
# Starts the project's own single-node Kubernetes test cluster on this host, without
# reaching any registry (docs/kubernetes.md):
#   - kube-apiserver and kubelet built from the module proxy (scripts/k8s/build.sh, cached
#     in /var/cache/cordon-k8s); etcd and the CNI plugins from Debian;
#   - the kubelet on the standard containerd (/run/containerd/containerd.sock), restarted
#     once with a config of the project's own (its CRI plugin with
#     restrict_oom_score_adj = true and a CNI directory of its own) when it runs without
#     it; dockerd and the `cordon` namespace's images, which scripts/container-env.sh
#     sets up, are checked afterwards;
#   - a local pause image and the busybox test image imported into containerd's k8s.io
#     namespace;
#   - cordon's seccomp profile for its Pods (`cordon internal seccomp-profile`) in the
#     kubelet's seccomp directory;
#   - the node at 198.18.0.1 on the loopback interface, Pods on a bridge with no
#     gateway (198.18.1.0/24), Services 198.18.2.0/24: nothing routes off the host.
# Waits until the API server is ready and the node is Ready, then prints the admin
# kubeconfig's path on stdout. Idempotent; every process runs in the background with its
# log under /var/log/cordon-k8s.
# Usage: scripts/k8s-env.sh [start|stop|reset]   (reset: stop, then forget the cluster's
#        state: etcd's data, certificates and tokens)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
state=/var/lib/cordon-k8s
run=/run/cordon-k8s
logs=/var/log/cordon-k8s
etc=/etc/cordon-k8s
ctr_sock=/run/containerd/containerd.sock
ctr_conf=$etc/containerd.toml
cni_dir=$etc/cni/net.d
pause_image=registry.k8s.io/pause:3.6
node=cordon-node
node_ip=198.18.0.1
pod_cidr=198.18.1.0/24
svc_cidr=198.18.2.0/24
bridge=cordon-k8s-br
api_port=16443
etcd_port=12379
api=https://127.0.0.1:$api_port
kubeconfig=$state/kubeconfig
wait_api=${CORDON_K8S_WAIT_API:-180}
wait_node=${CORDON_K8S_WAIT_NODE:-180}
log() { echo "k8s-env: $*" >&2; }
die() { log "$*"; exit 1; }

# running NAME: the pid of a component this script started, when it still runs. The
# process at that pid must be the component (its program's name is NAME): after a
# reboot, or a machine restored from a snapshot, the pid file outlives the process and
# its pid may be another's.
running() {
  local pid argv0
  pid=$(cat "$run/$1.pid" 2>/dev/null) || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  argv0=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | head -n 1) || return 1
  [ "${argv0##*/}" = "$1" ] && echo "$pid"
}

# launch NAME CMD...: starts CMD in its own session, its output in $logs/NAME.log.
launch() {
  local name=$1
  shift
  mkdir -p "$run" "$logs"
  log "starting $name (log: $logs/$name.log)"
  setsid "$@" </dev/null >>"$logs/$name.log" 2>&1 &
  echo $! >"$run/$name.pid"
}

# fail NAME WHAT: shows the end of NAME's log and exits.
fail() {
  log "$2; the end of $logs/$1.log:"
  tail -n 40 "$logs/$1.log" >&2 || true
  exit 1
}

# wait_until SECONDS NAME CMD...: retries CMD every half second for up to SECONDS,
# failing with NAME's log when it never succeeds or NAME's process exits.
wait_until() {
  local limit=$1 name=$2 deadline
  shift 2
  deadline=$((SECONDS + limit))
  while ((SECONDS < deadline)); do
    "$@" >/dev/null 2>&1 && return 0
    running "$name" >/dev/null || fail "$name" "$name exited"
    sleep 0.5
  done
  fail "$name" "$name not ready after ${limit}s"
}

# stop_pid NAME: ends a component this script started (TERM, then KILL after 20 s).
stop_pid() {
  local pid
  pid=$(running "$1") || { rm -f "$run/$1.pid"; return 0; }
  log "stopping $1 ($pid)"
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 200); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
  rm -f "$run/$1.pid"
}

# curl_api PATH...: an admin request to the API server.
curl_api() {
  curl -sS --fail --max-time 10 --cacert "$state/pki/ca.crt" \
    -H "Authorization: Bearer $(cat "$state/admin.token")" "$@"
}

source "$here/k8s/env-lib.sh"

case "${1:-start}" in
  start) ;;
  stop) stop_all; exit 0 ;;
  reset) stop_all; log "removing $state"; rm -rf "$state"; exit 0 ;;
  *) die "usage: $0 [start|stop|reset]" ;;
esac

[ "$(id -u)" = 0 ] || die "needs root (restarts containerd, runs the kubelet)"
install_packages
image=$("$here/container-env.sh")
bin=$("$here/k8s/build.sh" kube-apiserver kubelet)
containerd_with_config "$image"
import_images "$image"
network
pki
start_etcd
start_apiserver "$bin"
seccomp_profile
start_kubelet "$bin"
echo "$kubeconfig"
