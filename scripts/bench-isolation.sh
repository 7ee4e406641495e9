#!/usr/bin/env bash
# Isolation benchmark (issue 12): what the unprivileged stage, the confining trampoline,
# Landlock and seccomp cost. One hyperfine run compares, side by side, `cordon run --
# true` and a warm `cordon exec SID -- true` of this tree against the same commands of
# the tree before them (BENCH_BEFORE, a git revision: c96cf0a by default), built into
# bench/out/before. Ratios are medians from that one run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/bench/out"
mkdir -p "$out"
runs=${BENCH_RUNS:-100}
rev=${BENCH_BEFORE:-c96cf0a}
before="$out/before-$rev"
if [[ ! -x $before/cordon ]]; then
  src=$(mktemp -d /tmp/cordon-before.XXXXXX)
  git -C "$root" archive "$rev" | tar -x -C "$src"
  mkdir -p "$before"
  (cd "$src" && CGO_ENABLED=0 go build -trimpath -tags noengines -o "$before/cordon" ./cmd/cordon &&
    CGO_ENABLED=0 go build -trimpath -o "$before/cordon-engines" ./cmd/cordon &&
    CGO_ENABLED=0 go build -trimpath -o "$before/cordon-init" ./cmd/cordon-init)
  rm -rf "$src"
fi
after="$root/bin"
ws=$(mktemp -d /tmp/cordon-bench-iso.XXXXXX)
audit=$(mktemp -d /tmp/cordon-bench-iso-audit.XXXXXX)
export CORDON_AUDIT_DIR=$audit # a ledger of the benchmark's own, removed with it
sids=()
cleanup() {
  "$before/cordon" session stop "${sids[0]:-x}" >/dev/null 2>&1 || true
  "$after/cordon" session stop "${sids[1]:-x}" >/dev/null 2>&1 || true
  rm -rf "$ws" "$audit"
}
trap cleanup EXIT
# A workspace each for the two sessions and the runs: a run or session is refused in a
# workspace another one holds. Each has a contract of its own: a running session of
# this tree keeps a missing cordon.yaml from being created with an empty placeholder,
# which the tree before reads as an empty (invalid) contract.
for d in before after run; do
  mkdir -p "$ws/$d" && git -C "$ws/$d" init -q . && printf 'version: 1\n' > "$ws/$d/cordon.yaml"
done
bsid=$(cd "$ws/before" && "$before/cordon" session start --backend bwrap)
sids[0]=$bsid
asid=$(cd "$ws/after" && "$after/cordon" session start --backend bwrap)
sids[1]=$asid
cd "$ws/run"
echo "== isolation cost: before ($rev) vs after, cordon run -- true and warm cordon exec -- true, bwrap, as $(id -un) ($runs runs each, one hyperfine run)"
hyperfine -N --warmup 5 --runs "$runs" --export-json "$out/isolation.json" \
  -n "run before" "$before/cordon run -- true" \
  -n "run after" "$after/cordon run -- true" \
  -n "exec before" "$before/cordon exec $bsid -- true" \
  -n "exec after" "$after/cordon exec $asid -- true" >/dev/null
(cd "$root" && go run ./scripts/benchtable -baseline "run before" "$out/isolation.json") | tee "$out/isolation.txt"
