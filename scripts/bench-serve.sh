#!/usr/bin/env bash
# cordon serve (issue 36), side by side in one run each:
#   - a session start plus its first `exec -- true` through the TCP API: claimed from a
#     warm pool vs started cold vs a bare `bwrap ... true`;
#   - load: 5 tenants x 10 concurrent sessions x 20 execs through the TCP API: errors,
#     exec latency p50/p99, the daemon's peak RSS.
# Results go to bench/out/serve-*.txt.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/bench/out"
mkdir -p "$out"
bs=$(mktemp /tmp/cordon-benchserve.XXXXXX)
trap 'rm -f "$bs"' EXIT
(cd "$root" && go build -o "$bs" ./scripts/benchserve)
echo "== cordon serve: warm claim vs cold start vs bare bwrap"
"$bs" -cordon "$root/bin/cordon" -claims "${BENCH_CLAIMS:-30}" | tee "$out/serve-claims.txt"
echo "== cordon serve: load"
"$bs" -cordon "$root/bin/cordon" -tenants 5 -sessions 10 -execs 20 | tee "$out/serve-load.txt"
