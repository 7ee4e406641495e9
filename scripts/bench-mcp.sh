#!/usr/bin/env bash
# MCP benchmark (issue 38): an MCP `exec` tool call on a connected `cordon mcp` vs a
# warm `cordon exec` / `cordon-exec` vs a bare bwrap start, interleaved in one run
# (scripts/benchmcp). Results go to bench/out/mcp.txt.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/bench/out"
mkdir -p "$out"
ws=$(mktemp -d /tmp/cordon-bench-mcp.XXXXXX)
audit=$(mktemp -d /tmp/cordon-bench-mcp-audit.XXXXXX)
export CORDON_AUDIT_DIR=$audit
trap 'rm -rf "$ws" "$audit"' EXIT
(cd "$root" && go build -o "$ws/.benchmcp" ./scripts/benchmcp)
cd "$ws" && git init -q .
echo "== MCP exec round trip vs cordon exec vs bare bwrap (${BENCH_MCP_RUNS:-50} rounds)"
"$ws/.benchmcp" -bin "$root/bin" -n "${BENCH_MCP_RUNS:-50}" | tee "$out/mcp.txt"
