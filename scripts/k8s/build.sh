#!/usr/bin/env bash
# Builds the test cluster's kube-apiserver and kubelet from the module proxy, through the
# build module beside this script (scripts/k8s/build/go.mod: k8s.io/kubernetes at one
# release, every k8s.io staging module pinned to the same release), into a cache kept
# between runs: $CORDON_K8S_CACHE/<release>/bin (default /var/cache/cordon-k8s).
# The Go module and build caches are Go's own (GOMODCACHE, GOCACHE), so a second
# machine run or a rebuild after a change reuses them. A build is redone only when the
# build module (go.mod, go.sum) or the Go version changed since the cached one.
# Prints the bin directory on stdout. Idempotent; the build's output goes to
# /var/log/cordon-k8s/build.log.
# Usage: scripts/k8s/build.sh [BINARY...]   (default kube-apiserver kubelet)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mod=$here/build
log() { echo "k8s-build: $*" >&2; }
export PATH=$PATH:/usr/local/go/bin
command -v go >/dev/null 2>&1 || { log "go not found (expected at /usr/local/go/bin)"; exit 1; }

release=$(sed -n 's/^\(require\)\?[[:space:]]*k8s\.io\/kubernetes[[:space:]]\+\(v[^[:space:]]*\).*/\2/p' "$mod/go.mod" | head -n 1)
[ -n "$release" ] || { log "no k8s.io/kubernetes requirement in $mod/go.mod"; exit 1; }
cache=${CORDON_K8S_CACHE:-/var/cache/cordon-k8s}
bin=$cache/$release/bin
logdir=${CORDON_K8S_LOG:-/var/log/cordon-k8s}
bins=("$@")
((${#bins[@]})) || bins=(kube-apiserver kubelet)

# The stamp names what the cached binaries were built from.
stamp=$( (go version; cat "$mod/go.mod" "$mod/go.sum" 2>/dev/null) | sha256sum | cut -c1-16)
todo=()
for b in "${bins[@]}"; do
  case $b in
    kube-apiserver|kubelet|kube-scheduler|kube-controller-manager) ;;
    *) log "unknown binary $b (kube-apiserver, kubelet, kube-scheduler, kube-controller-manager)"; exit 2 ;;
  esac
  if [ -x "$bin/$b" ] && [ "$(cat "$bin/$b.stamp" 2>/dev/null)" = "$stamp" ]; then
    continue
  fi
  todo+=("$b")
done
if ((${#todo[@]})); then
  mkdir -p "$bin" "$logdir"
  log "building ${todo[*]} $release into $bin (first build on a fresh machine: 15-30 min; log: $logdir/build.log)"
  start=$(date +%s)
  # -mod=mod: the build module's go.sum is committed, but a missing line is filled in
  # rather than failing the build. -trimpath and no VCS stamping: the same bytes from any
  # checkout. GOFLAGS from the environment are replaced, not added to.
  for b in "${todo[@]}"; do
    if ! (cd "$mod" && GOFLAGS=-mod=mod CGO_ENABLED=0 GOTOOLCHAIN=local \
      go build -trimpath -buildvcs=false -ldflags '-s -w' -o "$bin/$b.new" "k8s.io/kubernetes/cmd/$b") \
      >>"$logdir/build.log" 2>&1; then
      log "building $b failed; the end of $logdir/build.log:"
      tail -n 30 "$logdir/build.log" >&2
      exit 1
    fi
    mv "$bin/$b.new" "$bin/$b"
    echo "$stamp" >"$bin/$b.stamp"
  done
  log "built ${todo[*]} in $(($(date +%s) - start)) s"
fi
echo "$bin"
