#!/usr/bin/env bash
# Egress A/B: two cordon builds (or two environments for one build) moving the same body
# over loopback in interleaved rounds, so that load from elsewhere on the machine falls on
# both alike (issue 17). Each round runs curl directly, then through A, then through B, and
# prints for A and B the MB/s, the ratio to that round's direct run, the proxy's CPU per GB
# (cordon's user+system time while curl ran, from /proc/PID/stat: the proxy is in cordon's
# own process) and its context switches per GB; the last lines are the medians.
#
# Usage: scripts/bench-egress-ab.sh A B
#   A, B: a command prefix for cordon with an absolute path, e.g. "$PWD/bin/cordon" or
#   "GOMAXPROCS=1 /tmp/old/cordon" (it runs from a workspace of its own)
#   ROUNDS (default 7), MB (default 800), MODE http|connect (default http: curl's plain
#   HTTP through the proxy; connect: curl -p, a CONNECT tunnel)
set -euo pipefail
[ $# -eq 2 ] || { sed -n 2,14p "$0"; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=${ROUNDS:-7} mb=${MB:-800} mode=${MODE:-http}
tmp=$(mktemp -d /tmp/cordon-bench-egress-ab.XXXXXX)
cleanup() { [ -n "${srv:-}" ] && kill "$srv" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
export CORDON_AUDIT_DIR="$tmp/audit" # a ledger of the benchmark's own, removed with it
(cd "$root" && go build -o "$tmp/benchserver" ./scripts/benchserver)
"$tmp/benchserver" -listen 127.0.0.2:0 > "$tmp/addr" &
srv=$!
for _ in $(seq 50); do [ -s "$tmp/addr" ] && break; sleep 0.1; done
addr=$(cat "$tmp/addr"); port=${addr##*:}
mkdir -p "$tmp/ws"; cd "$tmp/ws"
cat > cordon.yaml <<YAML
version: 1
network:
  allow:
    - {cidr: 127.0.0.0/8, ports: [$port], why: benchmark server on loopback}
YAML
url="http://$addr/big?n=$((mb * 1024 * 1024))"
flag=""; [ "$mode" = connect ] && flag="-p"
tck=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
ctx() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/ctxt_switches/{s+=$2} END{print s+0}'; }
# through LABEL CMD DIRECT: one proxied download; appends "label MB/s ratio cpu ctx" to rows.
through() {
  local out="$tmp/out" p c0 x0 c1 x1
  : > "$out"
  # The sleeps keep cordon's start and end out of the sampled window.
  env $2 run -- sh -c "sleep 0.8; curl $flag -sS -o /dev/null -w '%{speed_download}\n' '$url'; sleep 0.3" > "$out" &
  p=$!
  sleep 0.5
  c0=$(cpu $p); x0=$(ctx $p)
  while [ ! -s "$out" ]; do sleep 0.01; done
  c1=$(cpu $p); x1=$(ctx $p)
  wait $p
  awk -v l="$1" -v b="$(cat "$out")" -v d="$3" -v c=$((c1 - c0)) -v x=$((x1 - x0)) -v t="$tck" -v gb="$(awk -v m="$mb" 'BEGIN{print m/1024}')" \
    'BEGIN{printf "%s %.0f %.3f %.0f %.0f\n", l, b/1e6, b/d, c*1000/t/gb, x/gb}' >> "$tmp/rows"
}
: > "$tmp/rows"
for _ in $(seq "$rounds"); do
  d=$(curl -sS -o /dev/null -w '%{speed_download}' "$url")
  echo "direct $(awk -v b="$d" 'BEGIN{printf "%.0f", b/1e6}') 1 0 0" >> "$tmp/rows"
  through A "$1" "$d"
  through B "$2" "$d"
done
med() { sort -g | awk '{v[++n]=$1} END{m=(n%2)?v[(n+1)/2]:(v[n/2]+v[n/2+1])/2; printf "%s", m}'; }
{
  echo "== egress A/B ($mode, $mb MB over loopback, $rounds interleaved rounds; A: $1; B: $2)"
  printf '%-7s %8s %8s %12s %12s\n' path MB/s ratio "cpu ms/GB" "ctxsw/GB"
  awk '{printf "%-7s %8s %8s %12s %12s\n", $1, $2, $3, $4, $5}' "$tmp/rows"
  echo "-- medians"
  for l in direct A B; do
    printf '%-7s' "$l"
    for i in 2 3 4 5; do printf ' %10s' "$(awk -v l="$l" -v i="$i" '$1==l{print $i}' "$tmp/rows" | med)"; done
    echo
  done
}
