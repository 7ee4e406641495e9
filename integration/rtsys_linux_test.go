package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/testutil"
)

// nobodyWorld makes w's workspace, home and run root nobody's (65534), for a cordon
// run as nobody, and returns a short runtime directory of nobody's.
func nobodyWorld(t *testing.T, w *world) (xdg string) {
	t.Helper()
	for _, d := range []string{w.ws, w.home, filepath.Dir(w.ws), w.runRoot} {
		if err := os.Chown(d, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	for d := filepath.Dir(filepath.Dir(w.ws)); d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		os.Chmod(d, 0o755) // t.TempDir's parents are 0700
	}
	filepath.Walk(w.home, func(p string, _ os.FileInfo, _ error) error { return os.Chown(p, 65534, 65534) })
	xdg, err := os.MkdirTemp("/tmp", "xdg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(xdg) })
	if err := os.Chown(xdg, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	return xdg
}

// rtsysPropagationDriver runs in a mount namespace of its own whose mounts are shared
// (as / is on every systemd host): it starts cordon ($0) as nobody with the sandbox
// script $1, waits until the sandbox runs, mounts binfmt_misc below the host's
// /proc/sys, and only then (mount propagation is complete when mount returns) lets the
// sandbox look at its mount table. $2 is a directory of the test's.
const rtsysPropagationDriver = `set -e
mkfifo "$2/in"
setpriv --reuid 65534 --regid 65534 --clear-groups "$0" run -- sh -c "$1" <"$2/in" >"$2/out" 2>&1 &
pid=$!
exec 3>"$2/in"
until grep -q '^ready$' "$2/out" 2>/dev/null; do
  kill -0 $pid 2>/dev/null || { cat "$2/out"; exit 3; }
  sleep 0.02
done
mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
echo mounted
echo go >&3
exec 3>&-
rc=0; wait $pid || rc=$?
cat "$2/out"
exit $rc`

// rtsysPropagationProbe is the sandbox's side: it shows its mount table and what it
// can read of binfmt_misc once the host side has mounted it.
const rtsysPropagationProbe = `echo ready
read go
echo probed
cat /proc/self/mountinfo
echo endmounts
cat /proc/sys/fs/binfmt_misc/status 2>/dev/null && echo BINFMT-READABLE
ls /proc/sys/fs/binfmt_misc/ 2>/dev/null | sed 's/^/BINFMT-ENTRY /'
exit 0`

// TestRTSysHostMountBelowProcSysStaysOut (red team of 82843cf, which bound the host
// procfs's /proc/sys): a non-root cordon starts bwrap in the caller's own mount
// namespace, whose mounts bwrap makes slaves of the host's. Were the sandbox's
// /proc/sys a bind of the host procfs's sys directory, a file system the host mounts below /proc/sys while the sandbox runs (binfmt_misc,
// mounted by hand, by a tool installing qemu-user handlers, or by systemd's automount
// on first access) must not arrive in the sandbox through mount propagation: the
// sandbox must never see the host's binfmt_misc (the property TestColdProcSysSkipHolds
// bwrap-binfmt asserts for a mount present at the start), and nothing below its
// /proc/sys may be a read-write mount process 1 never checked. The mount is made in a
// mount namespace of the test's own; the host's table is left as it is.
func TestRTSysHostMountBelowProcSysStaysOut(t *testing.T) {
	testutil.RequireRoot(t)
	_, err := exec.LookPath("setpriv")
	testutil.Require(t, err == nil, "setpriv (util-linux), to run cordon as nobody")
	w := newWorld(t)
	xdg := nobodyWorld(t, w)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "-m", "--propagation", "shared", "sh", "-c",
		rtsysPropagationDriver, testutil.Cordon(t), rtsysPropagationProbe, dir)
	cmd.Dir, cmd.Env = w.ws, append(w.env, "XDG_RUNTIME_DIR="+xdg)
	r := runResult(t, cmd, "unshare")
	if ctx.Err() != nil {
		t.Fatalf("the driver hung: %v", r)
	}
	if !strings.Contains(r.stdout, "mounted\n") || !strings.Contains(r.stdout, "probed\n") {
		t.Fatalf("the attack did not run (no mount, or no sandbox): %v", r)
	}
	_, rest, _ := strings.Cut(r.stdout, "probed\n")
	mi, after, _ := strings.Cut(rest, "endmounts\n")
	for _, m := range linux.ParseMountinfo(mi) {
		if m.FSType == "binfmt_misc" || (strings.HasPrefix(m.Point, "/proc/sys/") && !m.ReadOnly()) {
			t.Errorf("a host mount below /proc/sys propagated into the running sandbox: %s (%s, %s)\nsandbox saw:\n%s",
				m.Point, m.FSType, m.Opts, after)
		}
	}
	if strings.Contains(after, "BINFMT-READABLE") {
		t.Errorf("the sandbox reads the host's binfmt_misc: %s", after)
	}
}

// TestRTSysNoHostProcfsInodeState (red team of 82843cf): the sysctl files a sandbox
// sees are its own procfs's inodes, not the host procfs's, which every sandbox on the
// host (of every tenant) and the host itself share: an inode's times are those of its
// first look-up by anyone, so a sandbox learns when the host (or another tenant's
// sandbox) first touched a sysctl, and two sandboxes can signal through which sysctls
// are already cached. The host looks a sysctl up first; the sandbox, started at least
// a second later, must see an inode of its own (made no earlier than its start).
func TestRTSysNoHostProcfsInodeState(t *testing.T) {
	const f = "/proc/sys/kernel/ostype"
	fi, err := os.Stat(f)
	if err != nil {
		t.Fatal(err)
	}
	hostTime := fi.ModTime().Unix()
	for time.Now().Unix() <= hostTime+1 { // a run that starts in a later second than the host's inode
		time.Sleep(50 * time.Millisecond)
	}
	w := newWorld(t)
	start := time.Now().Unix()
	r := w.sh("stat -c 'mtime %Y' " + f)
	if r.code != 0 {
		t.Fatal(r)
	}
	var got int64
	if _, err := fmt.Sscanf(strings.TrimSpace(r.stdout), "mtime %d", &got); err != nil {
		t.Fatalf("no mtime: %v", r)
	}
	if got < start {
		t.Errorf("the sandbox sees the host procfs's inode of %s (mtime %d, the host's %d; the run started at %d): host procfs state is shared with every sandbox",
			f, got, hostTime, start)
	}
}

// rtsysEscapeProbe ($1: a host pid the sandbox must not see) walks out of the bound
// /proc/sys every way a shell can (.. at the bind's root, through an fd kept open and
// its magic link, cd and chdir back up, /proc/self/root and /proc/1/root) and writes
// sysctls through each path, namespaced ones (ns_last_pid is 0666, fs/mqueue the ipc
// namespace's, net the sandbox's own netns) and global ones, and through a reopen of a
// read-only fd. Every line of interest is tagged.
const rtsysEscapeProbe = `H=$1
for p in /proc/sys/.. /proc/self/root/proc/sys/.. /proc/1/root/proc/sys/..; do
  [ -e "$p/$H" ] && echo "LEAK $p/$H"
done
exec 3</proc/sys
[ -e "/proc/self/fd/3/../$H" ] && echo "LEAK fd/3/../$H"
(cd /proc/sys/kernel && cd ../.. && [ -e "./$H" ] && echo "LEAK cd ../../$H")
for f in /proc/sys/kernel/ns_last_pid /proc/self/root/proc/sys/kernel/ns_last_pid \
  /proc/self/fd/3/kernel/ns_last_pid /proc/1/root/proc/sys/kernel/ns_last_pid \
  /proc/sys/fs/mqueue/msg_max /proc/sys/net/ipv4/ping_group_range \
  /proc/sys/user/max_user_namespaces /proc/sys/kernel/hostname /proc/sys/kernel/core_pattern \
  /proc/sys/fs/binfmt_misc/register /proc/sys/kernel/../../sys/vm/drop_caches; do
  if (printf '1' >"$f") 2>/dev/null; then echo "WROTE $f"; fi
done
exec 4</proc/sys/kernel/ns_last_pid
if (printf '1' >/proc/self/fd/4) 2>/dev/null; then echo "WROTE reopened fd"; fi
echo done`

// TestRTSysProcSysBindHolds: a bwrap sandbox's read-only /proc/sys (root's: a procfs
// of its own) leads nowhere else (no host process is visible by any walk up from it)
// and no sysctl is writable through any path into it; a non-root cordon's sandbox
// (/proc/sys on its own /proc's mount, walked by process 1) lets its own namespaces'
// sysctls be written, and no other.
func TestRTSysProcSysBindHolds(t *testing.T) {
	host := strconv.Itoa(os.Getpid()) // this test's pid: no pid of the sandbox's namespace
	check := func(t *testing.T, r result, namespacedWritable bool) {
		t.Helper()
		if r.code != 0 || !strings.Contains(r.stdout, "done\n") {
			t.Fatalf("the probe did not run: %v", r)
		}
		for _, l := range strings.Split(r.stdout, "\n") {
			if p, ok := strings.CutPrefix(l, "WROTE "); ok && namespacedWritable {
				if i := strings.LastIndex(p, "/proc/sys/"); i >= 0 && namespacedSysctl(p[i:]) {
					continue
				}
			}
			if strings.HasPrefix(l, "LEAK ") || strings.HasPrefix(l, "WROTE ") {
				t.Errorf("%s", l)
			}
		}
	}
	t.Run("root", func(t *testing.T) {
		testutil.RequireRoot(t)
		w := newWorld(t)
		check(t, w.cordon("", "run", "--", "sh", "-c", rtsysEscapeProbe, "sh", host), false)
	})
	t.Run("nobody", func(t *testing.T) {
		testutil.RequireRoot(t)
		w := newWorld(t)
		xdg := nobodyWorld(t, w)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, testutil.Cordon(t), "run", "--", "sh", "-c", rtsysEscapeProbe, "sh", host)
		cmd.Dir, cmd.Env = w.ws, append(w.env, "XDG_RUNTIME_DIR="+xdg)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		check(t, runResult(t, cmd, "cordon"), true)
	})
}

// TestReadableProcSysKernel: a contract that grants the host's /proc/sys/kernel
// readable gets it, read-only, on root's bwrap too, where the sandbox's /proc/sys is a
// procfs of its own: the grant was nested into that tree as if it were a clone of the
// host's /proc/sys, and every run failed ("kernel: replaced since it was cloned").
func TestReadableProcSysKernel(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	w.contract("version: 1\nfilesystem:\n  writable: [\".\"]\n  readable: [\"@system\", /proc/sys/kernel]\n")
	r := w.sh("cat /proc/sys/kernel/osrelease; if (echo x >/proc/sys/kernel/domainname) 2>/dev/null; then echo WROTE; fi; echo done")
	release, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	if r.code != 0 || !strings.HasPrefix(r.stdout, string(release)) || !strings.HasSuffix(r.stdout, "done\n") || strings.Contains(r.stdout, "WROTE") {
		t.Fatalf("readable /proc/sys/kernel: %v; want the host's %q, read-only", r, release)
	}
}
