#!/usr/bin/env bash
# The Kubernetes part of `make test`, and all of `make k8s-test`.
#   scripts/k8s-test.sh setup   starts the project's own single-node test cluster
#                               (scripts/k8s-env.sh; on a fresh machine this first builds
#                               kube-apiserver and the kubelet from the module proxy, ~30
#                               minutes on 2 cores, cached in /var/cache/cordon-k8s
#                               afterwards) and builds bin/ (the Pod image's cordon-init,
#                               and cordon for the tests that run it). `make test` runs
#                               this, then `go test -tags k8s ./...`, so the tests behind
#                               the build tag k8s (package integration/k8s) run beside
#                               the other packages.
#   scripts/k8s-test.sh         setup, then vets and runs integration/k8s alone.
# The cluster is left running, as containerd and dockerd are: the next run starts in
# seconds (`sudo scripts/k8s-env.sh stop` ends it).
# Not root: skipped, except under CI=true, where that fails (nothing may skip in CI).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
go=${GO:-go}
if [ "$(id -u)" != 0 ]; then
  if [ "${CI:-}" = true ]; then
    echo "k8s-test: the test cluster needs root; under CI=true this fails rather than skips" >&2
    exit 1
  fi
  echo "k8s-test: skipped: the test cluster needs root (sudo make k8s-test)" >&2
  exit 0
fi
start=$(date +%s)
scripts/k8s-env.sh >/dev/null
echo "k8s-test: cluster ready in $(($(date +%s) - start)) s" >&2
make --no-print-directory build GO="$go" >/dev/null
[ "${1:-}" = setup ] && exit 0
"$go" vet -tags k8s ./integration/k8s/
"$go" test -race -tags k8s -count=1 -timeout 15m ./integration/k8s/
