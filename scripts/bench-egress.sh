#!/usr/bin/env bash
# Egress benchmark (issues 3, 17 and 39), side by side in one run:
#  - throughput: a 400 MiB body ($MB) over loopback with curl, directly, through a bare
#    splice relay (the floor: what one more hop costs at all), through cordon's proxy as
#    plain HTTP (curl inside `cordon run`, which sets HTTP_PROXY) and as a CONNECT tunnel
#    (curl -p through the same proxy), and HTTPS directly and through CONNECT (HTTPS_PROXY);
#    median of $REPS rounds, MB/s, the ratio to direct and the relaying process's CPU
#    seconds per GiB;
#    A BPF sockmap relay of CONNECT tunnels (issue 39, prototypes not kept)
#    measured 369 and 421 MB/s, 0.12 and 0.15 of direct, 0.41 and 0.33
#    cpu s/GB (its kernel worker's CPU not counted), against splice's 1969 and 855 MB/s,
#    1.01 and 0.35, 0.28 and 0.23 in runs of the same minutes (REPS=3 and 5, load 4-7);
#    the third, complete one (branch sockmap-relay-experiment) 517 and 860 MB/s, 0.40
#    and 0.44, 0.46 and 0.28 cpu s/GB, against splice's 580 and 1230, 0.44 and 0.63,
#    0.72 and 0.38 (REPS=5, load 4.6 and 3.7);
#    egress/doc.go says why tunnels stay on splice;
#  - the older table: a 200 MB download and 1,000 small keep-alive requests, direct,
#    through cordon and through srt's proxy when srt is installed.
# Results go to bench/out/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cordon=${CORDON:-$root/bin/cordon} # CORDON=path compares another build
out="$root/bench/out"
mkdir -p "$out"
tmp=$(mktemp -d /tmp/cordon-bench-egress.XXXXXX)
cleanup() { for p in ${srv:-} ${tsrv:-} ${rly:-}; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
export CORDON_AUDIT_DIR="$tmp/audit" # a ledger of the benchmark's own, removed with it
(cd "$root" && go build -o "$tmp/benchserver" ./scripts/benchserver && go build -o "$tmp/benchtable" ./scripts/benchtable)
"$tmp/benchserver" -listen 127.0.0.2:0 > "$tmp/addr" &
srv=$!
for _ in $(seq 50); do [ -s "$tmp/addr" ] && break; sleep 0.1; done
addr=$(cat "$tmp/addr"); port=${addr##*:}
"$tmp/benchserver" -listen 127.0.0.2:0 -tls > "$tmp/taddr" &
tsrv=$!
for _ in $(seq 50); do [ -s "$tmp/taddr" ] && break; sleep 0.1; done
taddr=$(cat "$tmp/taddr"); tport=${taddr##*:}
big=$((200 * 1024 * 1024))
ws="$tmp/ws"; mkdir -p "$ws"; cd "$ws"
cat > cordon.yaml <<YAML
version: 1
network:
  allow:
    - {cidr: 127.0.0.0/8, ports: [$port, $tport], why: benchmark servers on loopback}
YAML
cat > "$tmp/srt.json" <<JSON
{"network":{"allowedDomains":["127.0.0.2:$port","127.0.0.2"],"deniedDomains":[]},
 "filesystem":{"denyRead":[],"allowWrite":["$ws"],"denyWrite":[]}}
JSON
for i in $(seq 1000); do printf 'url = "http://%s/small"\noutput = "/dev/null"\n' "$addr"; done > small.curl
dl="curl -sS -o /dev/null -w %{speed_download} http://$addr/big?n=$big"
lat='curl -sS -K small.curl -w "%{time_total}\n"'
have_srt=0; command -v srt >/dev/null 2>&1 && have_srt=1
srt_run() { srt -s "$tmp/srt.json" -c "sleep 0.3; export NO_PROXY= no_proxy=; $1"; }

reps=${REPS:-5}
huge=$((${MB:-400} * 1024 * 1024))
hurl="http://$addr/big?n=$huge"
turl="https://$taddr/big?n=$huge"
# The floor: a bare splice relay (benchserver -relay, stdlib io.Copy between two TCP
# connections, no policy) in front of the same server. What it costs is what one more
# loopback hop through any user-space relay costs on this machine.
"$tmp/benchserver" -listen 127.0.0.3:0 -relay "$addr" > "$tmp/raddr" &
rly=$!
for _ in $(seq 50); do [ -s "$tmp/raddr" ] && break; sleep 0.1; done
rurl="http://$(cat "$tmp/raddr")/big?n=$huge"
# Rounds are interleaved (direct, relay, HTTP proxy, CONNECT, then again) so that load from
# elsewhere on the machine falls on all alike; each figure is the median of its rounds and
# each ratio the median of the per-round ratios.
#
# CPU is the relaying process's user+system time per GB moved (from /proc/PID/stat, while
# curl ran): cordon's, for the proxy runs in cordon's own process, or the relay's. Direct
# runs have no relay: their column is the client's (curl's) CPU per GB, for scale.
speed='-sS -o /dev/null -w %{speed_download}'
tck=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# direct CURL-ARGS: "bytes/s cpu-ticks" of one download by curl on the host.
direct() {
  /usr/bin/time -f '%U %S' -o "$tmp/time" curl $speed "$@" > "$tmp/speed"
  echo "$(cat "$tmp/speed") $(awk -v t="$tck" '{printf "%.0f", ($1 + $2) * t}' "$tmp/time")"
}
# relayed CURL-ARGS: the same through the bare relay, with the relay's CPU.
relayed() {
  local c0; c0=$(ticks $rly)
  curl $speed "$@" > "$tmp/speed"
  echo "$(cat "$tmp/speed") $(($(ticks $rly) - c0))"
}
# proxied CURL-ARGS: the same by curl inside `cordon run`, with cordon's CPU while curl ran
# (sampled after the sandbox is up and again once curl printed; the sleeps keep cordon's
# start and end out of that window).
proxied() {
  local out="$tmp/out" p c0 c1 q
  : > "$out"
  q=$(printf ' %q' "$@")
  "$cordon" run -- sh -c "echo up; sleep 0.3; curl $speed$q; echo; sleep 0.3" > "$out" &
  p=$!
  while kill -0 $p 2>/dev/null && [ "$(wc -l < "$out")" -lt 1 ]; do sleep 0.01; done
  c0=$(ticks $p)
  while kill -0 $p 2>/dev/null && [ "$(wc -l < "$out")" -lt 2 ]; do sleep 0.01; done
  c1=$(ticks $p)
  wait $p
  echo "$(sed -n 2p "$out") $((c1 - c0))"
}
: > "$tmp/rounds"
for _ in $(seq "$reps"); do
  echo "$(direct "$hurl") $(relayed "$rurl") $(proxied "$hurl") $(proxied -p "$hurl")" \
    "$(direct -k "$turl") $(proxied -k "$turl")" >> "$tmp/rounds"
done
kill $rly
# Columns of a round: bytes/s and CPU ticks for direct, relay, HTTP proxy, CONNECT,
# https direct, https via CONNECT.
med() { sort -g | awk '{v[++n]=$1} END{m=(n%2)?v[(n+1)/2]:(v[n/2]+v[n/2+1])/2; printf "%.3f", m}'; }
mbs() { awk -v i="$1" '{print $i/1e6}' "$tmp/rounds" | med; }
ratio() { awk -v i="$1" -v b="$2" '{print $i/$b}' "$tmp/rounds" | med; }
cpu() { awk -v i="$1" -v t="$tck" -v gb="$(awk -v n="$huge" 'BEGIN{print n/2^30}')" '{print $i/t/gb}' "$tmp/rounds" | med; }
# line LABEL COLUMN BASE [RELAY]: MB/s, ratio to BASE's, CPU, and the ratio to the relay's.
line() {
  local r=-; [ -n "${4:-}" ] && r=$(ratio "$2" "$4")
  printf '%-30s %8.0f %7.2f %9s %14.3f\n' "$1" "$(mbs "$2")" "$(ratio "$2" "$3")" "$r" "$(cpu $(($2 + 1)))"
}
{
  echo "== egress throughput: $((huge >> 20)) MiB over loopback, curl, median of $reps interleaved rounds (one run)"
  printf '%-30s %8s %7s %9s %14s\n' path MB/s ratio "vs relay" "cpu s/GB"
  line "direct (curl's cpu)" 1 1
  line "bare splice relay (floor)" 3 1
  line "cordon HTTP proxy" 5 1 3
  line "cordon CONNECT tunnel" 7 1 3
  line "https direct (curl's cpu)" 9 9
  line "https via cordon CONNECT" 11 9
  echo "cpu s/GB: the relaying process's user+system seconds per GiB moved (cordon's for"
  echo "the proxy, the relay's for the floor); on direct rows, curl's own, for scale"
  echo
} | tee "$out/egress-throughput.txt"

row() { printf '%-22s %12s %12s %12s\n' "$@"; }
{
  echo "== egress: 200 MB download and 1,000 keep-alive requests over loopback (one run)"
  row "path" "MB/s" "p50 ms" "p99 ms"
  d_bps=$($dl); read -r d50 d99 _ < <(sh -c "$lat" | "$tmp/benchtable" -quantiles)
  row direct "$(awk -v b="$d_bps" 'BEGIN{printf "%.0f", b/1e6}')" "$d50" "$d99"
  c_bps=$("$cordon" run -- $dl); read -r c50 c99 _ < <("$cordon" run -- sh -c "$lat" | "$tmp/benchtable" -quantiles)
  row "cordon proxy" "$(awk -v b="$c_bps" 'BEGIN{printf "%.0f", b/1e6}')" "$c50" "$c99"
  if [ "$have_srt" = 1 ]; then
    s_bps=$(srt_run "$dl" | tail -1); read -r s50 s99 _ < <(srt_run "$lat" | "$tmp/benchtable" -quantiles)
    row "srt proxy" "$(awk -v b="$s_bps" 'BEGIN{printf "%.0f", b/1e6}')" "$s50" "$s99"
  fi
  echo
  awk -v d="$d_bps" -v c="$c_bps" -v d50="$d50" -v c50="$c50" 'BEGIN{
    printf "cordon throughput: %.0f%% of direct; p50 added latency: %.3f ms\n", 100*c/d, c50-d50 }'
  if [ "$have_srt" = 1 ]; then
    awk -v s="$s_bps" -v c="$c_bps" -v s50="$s50" -v c50="$c50" 'BEGIN{
      printf "cordon vs srt: %.1fx the throughput, p50 %.3f ms vs %.3f ms\n", c/s, c50, s50 }'
  fi
} | tee "$out/egress.txt"
