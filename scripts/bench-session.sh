#!/usr/bin/env bash
# Session benchmark (issue 8), side by side in one hyperfine run per backend:
#   bwrap:  warm `cordon exec SID -- true` and `cordon-exec SID -- true` (the small client,
#           issue 17)  vs  a fresh `cordon run -- true`  vs bare bwrap
#   docker: warm `cordon exec SID -- true` and `cordon-exec SID -- true` (docker session)
#           vs  `docker exec C true` into an already running container of the same image
# Ratios are medians from the same run. Results go to bench/out/session-*.{json,txt}.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cordon="$root/bin/cordon"
cexec="$root/bin/cordon-exec"
out="$root/bench/out"
mkdir -p "$out"
runs=${BENCH_RUNS:-100}
ws=$(mktemp -d /tmp/cordon-bench-session.XXXXXX)
audit=$(mktemp -d /tmp/cordon-bench-session-audit.XXXXXX)
export CORDON_AUDIT_DIR=$audit # a ledger of the benchmark's own, removed with it
sids=() ctr=""
cleanup() {
  for s in "${sids[@]}"; do "$cordon" session stop "$s" >/dev/null 2>&1 || true; done
  [[ -n $ctr ]] && docker rm -f "$ctr" >/dev/null 2>&1 || true
  rm -rf "$ws" "$audit"
}
trap cleanup EXIT
# Each backend's session gets a workspace of its own, side by side: a workspace inside
# a running session's is that session's to guard (the second session's placeholder .git
# would be a nested repository the first quarantines).
mkdir -p "$ws/bwrap" && cd "$ws/bwrap"
git init -q .
(cd "$root" && go build -o "$ws/.benchtable" ./scripts/benchtable)

sid=$("$cordon" session start --backend bwrap)
sids+=("$sid")
# The fresh `cordon run` needs a workspace of its own: the session's is in use
# (a run is refused in a workspace another run or session holds).
mkdir -p "$ws/bwrap-run" && cd "$ws/bwrap-run"
git init -q .
echo "== bwrap: warm cordon exec and cordon-exec -- true vs cordon run -- true vs bare bwrap ($runs runs each, one hyperfine run)"
hyperfine -N --warmup 5 --runs "$runs" --export-json "$out/session-bwrap.json" \
  -n "cordon exec (warm session)" "$cordon exec $sid -- true" \
  -n "cordon-exec (warm session)" "$cexec $sid -- true" \
  -n "cordon run" "$cordon run -- true" \
  -n "bwrap" "bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --die-with-parent --new-session --cap-drop ALL /bin/true" >/dev/null
"$ws/.benchtable" -baseline "cordon run" "$out/session-bwrap.json" | tee "$out/session-bwrap.txt"
# Issue 17's row: a warm exec against bare bwrap (goal: cordon-exec at most 1.0x).
"$ws/.benchtable" -baseline "bwrap" "$out/session-bwrap.json" | tee -a "$out/session-bwrap.txt"

img=$("$root/scripts/container-env.sh")
mkdir -p "$ws/docker" && cd "$ws/docker"
printf 'version: 1\nimage: %s\n' "$img" > cordon.yaml
dsid=$("$cordon" session start --backend docker)
sids+=("$dsid")
ctr=$(docker run -d --network none --read-only --cap-drop ALL --security-opt no-new-privileges "$img" sleep 3600)
echo "== docker: warm cordon exec and cordon-exec -- true vs docker exec ($runs runs each, one hyperfine run)"
hyperfine -N --warmup 5 --runs "$runs" --export-json "$out/session-docker.json" \
  -n "docker exec" "docker exec $ctr true" \
  -n "cordon exec (docker session)" "$cordon exec $dsid -- true" \
  -n "cordon-exec (docker session)" "$cexec $dsid -- true" >/dev/null
"$ws/.benchtable" -baseline "docker exec" "$out/session-docker.json" | tee "$out/session-docker.txt"
