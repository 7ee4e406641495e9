#!/usr/bin/env bash
# Kubernetes placement benchmark (issue 37), side by side in one run on the project's
# test cluster (scripts/k8s-env.sh):
#   - a Pod session's cold start: create the objects -> the Pod runs -> attached
#   - a warm claim: claim a running warm Pod -> attached
#   - a warm exec of `true` through the session's control channel
#   - a plain exec of `true` in the same Pod through the API server: what
#     `kubectl exec` does (client-go's remotecommand; no kubectl is installed here)
#   - the same through the real binary: `cordon session start --backend kubernetes`
#     (the runner's services, the Pod created, attached) and `cordon exec SID -- true`
#     in it, beside a local bwrap session's same two commands
# Medians and p90 of BENCH_K8S_RUNS runs (default 15; the execs 3x as many). The
# measuring is integration/k8s's TestBenchK8s, which reuses the tests' Pod image and
# namespaces and removes what it made. Results go to bench/out/k8s.txt. Skipped when
# there is no test cluster (sudo scripts/k8s-env.sh starts one; its first build
# takes half an hour).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/bench/out"
mkdir -p "$out"
kubeconfig=${CORDON_K8S_KUBECONFIG:-/var/lib/cordon-k8s/kubeconfig}
if [[ ! -f $kubeconfig ]]; then
  echo "bench-k8s: no test cluster ($kubeconfig): skipped; sudo scripts/k8s-env.sh starts one" >&2
  exit 0
fi
"$root/scripts/k8s-env.sh" >/dev/null # idempotent: checks it runs
cd "$root"
CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o bin/cordon-init ./cmd/cordon-init
[[ -x bin/cordon ]] || { echo "bench-k8s: bin/cordon missing (make build)" >&2; exit 1; }
runs=${BENCH_K8S_RUNS:-15}
echo "== kubernetes: pod session cold start vs warm claim; warm exec vs a plain exec stream vs a local session ($runs runs)"
CORDON_K8S_KUBECONFIG=$kubeconfig CORDON_K8S_BENCH_RUNS=$runs CORDON_K8S_BENCH_OUT="$out/k8s.txt" \
  go test -tags k8s -count=1 -timeout 30m -run '^TestBenchK8s$' ./integration/k8s/ >/dev/null
cat "$out/k8s.txt"
