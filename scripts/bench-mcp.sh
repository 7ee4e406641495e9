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
# The MCP session and the warm one each in a workspace of its own, side by side: a
# workspace another session holds is refused.
mkdir -p "$ws/mcp" "$ws/warm"
git -C "$ws/mcp" init -q . && git -C "$ws/warm" init -q .
cd "$ws/mcp"
echo "== MCP exec round trip vs cordon exec vs bare bwrap (${BENCH_MCP_RUNS:-50} rounds)"
"$ws/.benchmcp" -bin "$root/bin" -warm "$ws/warm" -n "${BENCH_MCP_RUNS:-50}" | tee "$out/mcp.txt"
