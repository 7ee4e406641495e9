#!/usr/bin/env bash
# Egress benchmark (issues 3 and 17), side by side in one run:
#  - throughput: a 400 MB body over loopback with curl, directly, through cordon's proxy as
#    plain HTTP (curl inside `cordon run`, which sets HTTP_PROXY) and as a CONNECT tunnel
#    (curl -p through the same proxy), and HTTPS directly and through CONNECT (HTTPS_PROXY);
#    median of $REPS rounds, MB/s and the ratio to direct;
#  - the older table: a 200 MB download and 1,000 small keep-alive requests, direct,
#    through cordon and through srt's proxy when srt is installed.
# Results go to bench/out/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cordon=${CORDON:-$root/bin/cordon} # CORDON=path compares another build
out="$root/bench/out"
mkdir -p "$out"
tmp=$(mktemp -d /tmp/cordon-bench-egress.XXXXXX)
cleanup() { for p in ${srv:-} ${tsrv:-}; do kill "$p" 2>/dev/null; done; rm -rf "$tmp"; }
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

reps=${REPS:-3}
huge=$((400 * 1024 * 1024))
hurl="http://$addr/big?n=$huge"
turl="https://$taddr/big?n=$huge"
# Rounds are interleaved (direct, HTTP proxy, CONNECT, then again) so that load from
# elsewhere on the machine falls on all three alike; each figure is the median of its
# rounds and each ratio the median of the per-round ratios.
mbs() { "$@" | awk '{printf "%.0f\n", $1/1e6}'; }
med() { sort -g | awk '{v[++n]=$1} END{m=(n%2)?v[(n+1)/2]:(v[n/2]+v[n/2+1])/2; printf "%.2f", m}'; }
speed='-sS -o /dev/null -w %{speed_download}'
: > "$tmp/rounds"
for _ in $(seq "$reps"); do
  d=$(mbs curl $speed "$hurl")
  h=$(mbs "$cordon" run -- curl $speed "$hurl")
  c=$(mbs "$cordon" run -- curl -p $speed "$hurl")
  td=$(mbs curl -k $speed "$turl")
  tc=$(mbs "$cordon" run -- curl -k $speed "$turl")
  echo "$d $h $c $td $tc" >> "$tmp/rounds"
done
col() { awk -v i="$1" '{print $i}' "$tmp/rounds" | med; }
ratio() { awk -v i="$1" -v b="${2:-1}" '{print $i/$b}' "$tmp/rounds" | med; }
{
  echo "== egress throughput: 400 MB over loopback, curl, median of $reps interleaved rounds (one run)"
  printf '%-28s %10s %8s\n' path MB/s ratio
  printf '%-28s %10.0f %8.2f\n' direct "$(col 1)" 1
  printf '%-28s %10.0f %8.2f\n' "cordon HTTP proxy" "$(col 2)" "$(ratio 2)"
  printf '%-28s %10.0f %8.2f\n' "cordon CONNECT tunnel" "$(col 3)" "$(ratio 3)"
  printf '%-28s %10.0f %8.2f\n' "https direct" "$(col 4)" 1
  printf '%-28s %10.0f %8.2f\n' "https via cordon CONNECT" "$(col 5)" "$(ratio 5 4)"
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
