#!/usr/bin/env bash
# Phase tables (issue 39): where the time of `cordon run -- true` (bwrap) and of a warm
# `cordon exec SID -- true` / `cordon-exec SID -- true` goes, from the trace file
# (--trace, CORDON_TRACE) of each of BENCH_PHASE_RUNS runs: per phase its median, p90
# and share of the median total. The session's supervisor appends to the same trace
# (it was started with CORDON_TRACE). Results go to bench/out/phases-*.txt.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cordon="$root/bin/cordon"
cexec="$root/bin/cordon-exec"
out="$root/bench/out"
mkdir -p "$out"
runs=${BENCH_PHASE_RUNS:-20}
ws=$(mktemp -d /tmp/cordon-bench-phases.XXXXXX)
audit=$(mktemp -d /tmp/cordon-bench-phases-audit.XXXXXX)
export CORDON_AUDIT_DIR=$audit # a ledger of the benchmark's own, removed with it
sid=""
cleanup() {
  [[ -n $sid ]] && "$cordon" session stop "$sid" >/dev/null 2>&1 || true
  rm -rf "$ws" "$audit"
}
trap cleanup EXIT
(cd "$root" && go build -o "$ws/.benchphases" ./scripts/benchphases)
mkdir -p "$ws/w" && cd "$ws/w"
git init -q .

"$ws/.benchphases" -n "$runs" -label "cordon run -- true (bwrap)" -- "$cordon" run --backend bwrap -- true |
  tee "$out/phases-run.txt"

# The session's supervisor traces to $trace from its start; each exec's records are
# those that start in its window.
trace="$ws/session.jsonl"
sid=$(CORDON_TRACE=$trace "$cordon" session start --backend bwrap)
"$ws/.benchphases" -n "$runs" -trace "$trace" -label "warm cordon exec SID -- true (bwrap)" -- "$cordon" exec "$sid" -- true |
  tee "$out/phases-exec.txt"
"$ws/.benchphases" -n "$runs" -trace "$trace" -label "warm cordon-exec SID -- true (bwrap)" -- "$cexec" "$sid" -- true |
  tee -a "$out/phases-exec.txt"
