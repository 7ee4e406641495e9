#!/bin/sh
# Cost of a staged session's checkpoint (issue 16): a session whose stage holds 1,000
# changed files (4 KiB each), then one exec changing 1 file; `cordon session
# checkpoint` takes the same checkpoint the next exec takes automatically. Compare with
# `session sweep`, a request that takes none (the CLI and socket round trip). As root;
# BACKEND=bwrap|docker|containerd. The in-process figure:
#   go test -run x -bench Checkpoint1000 -benchtime 50x ./internal/layer
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
C=${CORDON:-$root/bin/cordon}
tmp=$(mktemp -d /tmp/cordon-bench-checkpoint.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/ws" "$tmp/audit" "$tmp/rr"
cd "$tmp/ws"
export CORDON_AUDIT_DIR="$tmp/audit" CORDON_RUN_ROOT="$tmp/rr" CORDON_BACKEND=${BACKEND:-bwrap}
id=$("$C" session start --stage)
"$C" exec "$id" -- sh -c 'mkdir -p src; i=0; while [ $i -lt 1000 ]; do head -c 4096 /dev/urandom > src/f$i; i=$((i+1)); done'
ms() { s=$(date +%s%N); "$@" >/dev/null 2>&1; e=$(date +%s%N); echo $(( (e-s)/1000000 )); }
echo "first checkpoint (1000 files copied): $(ms "$C" session checkpoint "$id" full) ms"
for i in 1 2 3 4 5; do
	"$C" exec "$id" -- sh -c "echo $i > src/f1"
	echo "checkpoint after an exec changing 1 file: $(ms "$C" session checkpoint "$id" c$i) ms"
done
for i in 1 2 3; do echo "session sweep (no checkpoint): $(ms "$C" session sweep "$id") ms"; done
"$C" session stop "$id"
"$C" discard "$id" >/dev/null
