#!/usr/bin/env bash
# Container backends benchmark (issue 5), side by side in one hyperfine run per engine:
#   cordon run --backend docker -- true      vs  docker run --rm --network none IMG true
#   cordon run --backend containerd -- true  vs  ctr run --rm IMG id true
# cordon runs the same image (the contract names it). The engine rows that add what
# cordon's sandbox always has (seccomp for ctr; read-only root, no capabilities and
# no-new-privileges for docker) show where the difference comes from. Ratios are
# medians from the same run. Results go to bench/out/containers-*.{json,txt}.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cordon="$root/bin/cordon"
out="$root/bench/out"
mkdir -p "$out"
runs=${BENCH_RUNS:-30}
img=$("$root/scripts/container-env.sh")
ref=$img
case "${ref%%/*}" in *.*|*:*|localhost) ;; *) [[ $ref == */* ]] || ref=library/$ref; ref=docker.io/$ref ;; esac
ws=$(mktemp -d /tmp/cordon-bench-containers.XXXXXX)
audit=$(mktemp -d /tmp/cordon-bench-containers-audit.XXXXXX)
export CORDON_AUDIT_DIR=$audit # a ledger of the benchmark's own, removed with it
trap 'rm -rf "$ws" "$audit"' EXIT
cd "$ws"
git init -q .
printf 'version: 1\nimage: %s\n' "$img" > cordon.yaml
(cd "$root" && go build -o "$ws/.benchtable" ./scripts/benchtable)

echo "== docker: cordon run --backend docker -- true vs docker run ($runs runs each, one hyperfine run)"
hyperfine -N --warmup 3 --runs "$runs" --export-json "$out/containers-docker.json" \
  -n "docker run" "docker run --rm --network none $img true" \
  -n "docker run, cordon's options" "docker run --rm --network none --read-only --cap-drop ALL --security-opt no-new-privileges --log-driver none $img true" \
  -n "cordon run --backend docker" "$cordon run --backend docker -- true" >/dev/null
"$ws/.benchtable" -baseline "docker run" "$out/containers-docker.json" | tee "$out/containers-docker.txt"

echo "== containerd: cordon run --backend containerd -- true vs ctr run ($runs runs each, one hyperfine run)"
hyperfine -N --warmup 3 --runs "$runs" --export-json "$out/containers-containerd.json" \
  -n "ctr run" "ctr -n cordon run --rm $ref cordon-bench true" \
  -n "ctr run --seccomp" "ctr -n cordon run --rm --seccomp $ref cordon-bench true" \
  -n "cordon run --backend containerd" "$cordon run --backend containerd -- true" >/dev/null
"$ws/.benchtable" -baseline "ctr run" "$out/containers-containerd.json" | tee "$out/containers-containerd.txt"
