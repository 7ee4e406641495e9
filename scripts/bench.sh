#!/usr/bin/env bash
# Side-by-side whole-command timings (issue 2): `cordon run -- true` against bare bwrap,
# Anthropic's srt and plain `true`, measured in one hyperfine run; ratios come from
# that same run; then a monitored `cordon run -- true` against an unmonitored one
# (issue 17). Results go to bench/out/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cordon="$root/bin/cordon"
out="$root/bench/out"
mkdir -p "$out"
runs=${BENCH_RUNS:-100}
ws=$(mktemp -d /tmp/cordon-bench.XXXXXX)
cfg=$(mktemp -d /tmp/cordon-bench-cfg.XXXXXX)
aud=$(mktemp -d /tmp/cordon-bench-audit.XXXXXX)
# Everything the script makes is undone on exit, whichever step ends it: each step adds
# its own to `undo` (a later step never replaces an earlier one's cleanup, as a second
# `trap` would: that left the common layout's loop mount and image behind).
undo=()
cleanup() { local i; for ((i = ${#undo[@]} - 1; i >= 0; i--)); do eval "${undo[i]}" || true; done; }
trap cleanup EXIT
undo+=('rm -rf "$ws" "$cfg" "$aud"')
# The runs' logs go to a ledger of the benchmark's own, removed with it: `make bench`
# leaves nothing in the user's ledger. Not below $cfg: the monitored run's contract is
# there, which makes $cfg its workspace, and cordon refuses a log the sandbox can reach.
export CORDON_AUDIT_DIR="$aud"
cd "$ws"
git init -q . 2>/dev/null || true

if ! command -v srt >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
  echo "bench: installing srt (npm i -g @anthropic-ai/sandbox-runtime)" >&2
  npm install -g @anthropic-ai/sandbox-runtime >/dev/null 2>&1 || true
fi
cat > "$cfg/srt.json" <<JSON
{"network":{"allowedDomains":[],"deniedDomains":[]},
 "filesystem":{"denyRead":[],"allowWrite":["$ws"],"denyWrite":[]}}
JSON

# A bare bwrap with a mount table comparable to the one cordon's default contract gives
# (issue 17): the same namespaces and flags, /etc and /usr read-only, /proc/sys
# read-only, private /root and /tmp, four masks in /etc, the workspace writable and 30 read-only binds in it (the
# protected paths), cordon's init binary and no process 1 of cordon's own.
mask=$(mktemp -d /tmp/cordon-bench-mask.XXXXXX)
touch "$mask/f"
mkdir -p "$ws/.bench-protected"
table=(--unshare-user --unshare-pid --unshare-net --unshare-ipc --unshare-uts --unshare-cgroup-try
       --disable-userns --die-with-parent --new-session --as-pid-1 --cap-drop ALL --hostname cordon
       --dev /dev --proc /proc --ro-bind /proc/sys /proc/sys --symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64
       --ro-bind /etc /etc --perms 0700 --tmpfs /root --perms 1777 --tmpfs /tmp --ro-bind /usr /usr)
for f in gshadow gshadow- shadow shadow-; do table+=(--ro-bind "$mask/f" "/etc/$f"); done
table+=(--bind "$ws" "$ws")
for i in $(seq 30); do mkdir -p "$ws/.bench-protected/$i"; table+=(--ro-bind "$mask" "$ws/.bench-protected/$i"); done
table+=(--ro-bind "$root/bin/cordon-init" /run/cordon/cordon --remount-ro / --chdir "$ws" -- /bin/true)
undo+=('rm -rf "$mask"')

cmds=(-n true true
      -n bwrap "bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --die-with-parent --new-session --cap-drop ALL /bin/true"
      -n "bwrap (cordon's mount table)" "bwrap ${table[*]}"
      -n "cordon run" "$cordon run -- true")
if command -v srt >/dev/null 2>&1; then
  cmds+=(-n srt "srt -s $cfg/srt.json /bin/true")
else
  echo "bench: srt unavailable (no npm); its row is missing" >&2
fi
echo "== start overhead: cordon run -- true vs bare bwrap vs srt vs true ($runs runs each, one hyperfine run)"
hyperfine -N --warmup 5 --runs "$runs" --export-json "$out/start.json" "${cmds[@]}" >/dev/null
(cd "$root" && go run ./scripts/benchtable -baseline "bwrap (cordon's mount table)" "$out/start.json") | tee "$out/start.txt"

# The same start on a common host's layout (issue 39). This VM's root file system is an
# ext4 without a journal, and /run lies on it. There ext4 checks each inode it is about to
# allocate for a recent deletion (fs/ext4/ialloc.c, recently_deleted), and a run makes and
# removes about 35 inodes: the 28 placeholders in the workspace and its run directory's
# records. The same two rows with the workspace and the ledger on a journaled ext4 (a loop
# image) and the run root on a tmpfs, as /run is on systemd hosts. Root only (a loop mount).
if [[ $(id -u) == 0 ]] && command -v mkfs.ext4 >/dev/null 2>&1; then
  std=$(mktemp -d /tmp/cordon-bench-std.XXXXXX)
  undo+=('rm -rf "$std"' 'umount "$std/mnt" 2>/dev/null')
  truncate -s 256M "$std/img" && mkfs.ext4 -q -F "$std/img" && mkdir "$std/mnt" &&
    mount -o loop "$std/img" "$std/mnt"
  sws="$std/mnt/ws" srun=$(mktemp -d /dev/shm/cordon-bench-runs.XXXXXX)
  undo+=('rm -rf "$srun"')
  mkdir -p "$sws/.bench-protected" && (cd "$sws" && git init -q .)
  stable=("${table[@]}")
  for i in "${!stable[@]}"; do stable[i]=${stable[i]//$ws/$sws}; done
  for i in $(seq 30); do mkdir -p "$sws/.bench-protected/$i"; done
  echo "== start on a common host's layout: workspace on a journaled ext4, run root on a tmpfs ($runs runs each, one hyperfine run)"
  mkdir "$std/mnt/audit"
  (cd "$sws" && CORDON_RUN_ROOT="$srun/runs" CORDON_AUDIT_DIR="$std/mnt/audit" hyperfine -N --warmup 5 --runs "$runs" --export-json "$out/start-std.json" \
    -n "bwrap (cordon's mount table)" "bwrap ${stable[*]}" \
    -n "cordon run" "$cordon run -- true" >/dev/null)
  (cd "$root" && go run ./scripts/benchtable -baseline "bwrap (cordon's mount table)" "$out/start-std.json") | tee "$out/start-std.txt"
else
  echo "bench: the common-layout start table needs root and mkfs.ext4; skipped" >&2
fi

# The monitor (issue 17): a monitored `cordon run -- true` against an unmonitored one.
# The programs stay pinned between runs (docs/monitor.md), so the warmup runs load them
# and the measured runs only register their cgroup. The contract lives outside the
# workspace (a workspace cordon.yaml would be the unmonitored run's contract too).
printf 'version: 1\nmonitor:\n  mode: best-effort\n' > "$cfg/monitored.yaml"
echo "== monitor: cordon run -- true with monitor.mode best-effort vs without ($runs runs each, one hyperfine run)"
hyperfine -N --warmup 5 --runs "$runs" --export-json "$out/monitor.json" \
  -n "cordon run" "$cordon run -- true" \
  -n "cordon run (monitor)" "$cordon run -c $cfg/monitored.yaml -- true" >/dev/null
(cd "$root" && go run ./scripts/benchtable -baseline "cordon run" "$out/monitor.json") | tee "$out/monitor.txt"

# The default limits (issue 34): `cordon run -- true` under the defaults (a memory and
# a pids cgroup, sized tmpfs mounts) against the same run with both lifted, which is
# what every run was before the defaults.
printf 'version: 1\nlimits: {memory: unlimited, pids: unlimited}\n' > "$cfg/unlimited.yaml"
echo "== limits: cordon run -- true with the default limits vs none ($runs runs each, one hyperfine run)"
hyperfine -N --warmup 5 --runs "$runs" --export-json "$out/limits.json" \
  -n "cordon run (no limits)" "$cordon run -c $cfg/unlimited.yaml -- true" \
  -n "cordon run (default limits)" "$cordon run -- true" >/dev/null
(cd "$root" && go run ./scripts/benchtable -baseline "cordon run (no limits)" "$out/limits.json") | tee "$out/limits.txt"

# The cold start's floor (issue 39): what any `cordon run` on bwrap pays before cordon
# does any work of its own. cordon's own Go start (`cordon version`), process 1's
# (cordon-init, which exits at once when not started by cordon: its start is what is
# measured), and bwrap as the unprivileged sandbox uid with the table cordon gives it
# as root (its handed-over sources bound from the host here; /bin/true as process 1),
# beside setpriv alone, whose cost the bwrap row includes. Their sum, less setpriv, is
# the floor; the start table above has the whole run.
ctl=$(mktemp /tmp/cordon-bench-ctl.XXXXXX)
undo+=('rm -f "$ctl"')
own=(--unshare-user --unshare-pid --unshare-net --unshare-ipc --unshare-uts --unshare-cgroup-try
     --disable-userns --die-with-parent --new-session --as-pid-1 --cap-drop ALL --hostname cordon
     --dev /dev --perms 1777 --tmpfs /dev/shm --proc /proc --ro-bind /proc/sys /proc/sys
     --symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64 --symlink usr/sbin /sbin
     --ro-bind /etc /etc --perms 0700 --tmpfs /root --perms 1777 --tmpfs /tmp --ro-bind /usr /usr
     --bind "$ws" "$ws" --ro-bind "$ctl" /run/cordon/control.sock --ro-bind /bin/true /run/cordon/cordon
     --remount-ro / --chdir "$ws" -- /run/cordon/cordon)
as_sandbox=(setpriv --reuid 65534 --regid 65534 --clear-groups)
chmod 0755 "$ws"
echo "== the cold start's floor: the two Go starts and bwrap with cordon's own table ($runs runs each, one hyperfine run)"
hyperfine -N -i --warmup 5 --runs "$runs" --export-json "$out/floor.json" \
  -n "cordon version (cordon's Go start)" "$cordon version" \
  -n "cordon-init (process 1's Go start)" "$root/bin/cordon-init" \
  -n "setpriv true" "${as_sandbox[*]} /bin/true" \
  -n "setpriv bwrap (cordon's own table)" "${as_sandbox[*]} bwrap ${own[*]}" >/dev/null
(cd "$root" && go run ./scripts/benchtable -baseline "setpriv true" "$out/floor.json") | tee "$out/floor.txt"

# Sessions (warm `cordon exec`) are measured by scripts/bench-session.sh.
