package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/testutil"
)

// TestNoPrivilegeToRegain attacks the kernel boundary itself: the sandbox holds no
// capability, cannot make a user namespace to get some back, cannot mount, and sees
// no process of the host.
func TestNoPrivilegeToRegain(t *testing.T) {
	w := newWorld(t)
	r := w.sh("grep -E '^Cap(Eff|Prm|Bnd|Amb):' /proc/self/status; " +
		"unshare -U -r true 2>&1; echo userns=$?; " +
		"mkdir -p /tmp/m && mount -t tmpfs none /tmp/m 2>&1; echo mount=$?; " +
		"ls /proc | grep -c '^[0-9]'; " +
		"kill -0 " + strconv.Itoa(os.Getpid()) + " 2>&1; echo kill=$?")
	for _, set := range []string{"CapEff", "CapPrm", "CapBnd", "CapAmb"} {
		assertContains(t, "capabilities", r.stdout, set+":\t0000000000000000")
	}
	if strings.Contains(r.stdout, "userns=0") || strings.Contains(r.stdout, "mount=0") || strings.Contains(r.stdout, "kill=0") {
		t.Fatalf("the sandbox regained a privilege or reached a host process: %v", r)
	}
	lines := strings.Fields(r.stdout)
	for i, l := range lines {
		if strings.HasPrefix(l, "mount=") && i+1 < len(lines) {
			if n, _ := strconv.Atoi(lines[i+1]); n > 5 {
				t.Errorf("the sandbox sees %d processes; only its own few are in its pid namespace", n)
			}
		}
	}
}

// TestKernelInterfacesNotWritable: the sandbox, even started by root, is not host
// root: the machine-wide sysctls (core_pattern ran a workspace script as host root
// once), sysrq and uevent_helper refuse it — for permission, not by chance.
func TestKernelInterfacesNotWritable(t *testing.T) {
	w := newWorld(t)
	out := w.attack("sysctl")
	assertContains(t, "core_pattern refused", out, "write /proc/sys/kernel/core_pattern denied: open /proc/sys/kernel/core_pattern: ")
	if strings.Contains(out, "core_pattern denied: open /proc/sys/kernel/core_pattern: no such file") {
		t.Errorf("core_pattern must exist (and refuse), not be missing: %s", out)
	}
	r := w.sh("id -u; cat /proc/sys/kernel/core_pattern >/dev/null && echo readable")
	assertContains(t, "sysctls stay readable", r.stdout, "readable")
	if os.Geteuid() == 0 && strings.HasPrefix(r.stdout, "0\n") && os.Getenv("CORDON_BACKEND") == "" {
		t.Errorf("a bwrap sandbox started by root runs as uid 0: %v", r)
	}
}

// TestSeccompRefusesWhatAgentsNeverNeed: the second kernel layer, on every backend.
func TestSeccompRefusesWhatAgentsNeverNeed(t *testing.T) {
	w := newWorld(t)
	out := w.attack("seccomp")
	for _, want := range []string{"keyctl denied: operation not permitted", "bpf denied: operation not permitted",
		"unshare-user denied: operation not permitted", "perf_event_open denied: operation not permitted",
		"userfaultfd denied: operation not permitted", "io_uring_setup denied: operation not permitted",
		"clone3-newuser denied", "socket-vsock denied: operation not permitted",
		"mount denied: operation not permitted"} {
		assertContains(t, "seccomp", out, want)
	}
	r := w.sh("grep -E '^(Seccomp|NoNewPrivs):' /proc/self/status")
	assertContains(t, "filter mode", r.stdout, "Seccomp:\t2")
}

// TestNoCgroupReachable: no cgroup file is writable from inside, so no command can
// kill a host cgroup or move itself out of its own.
func TestNoCgroupReachable(t *testing.T) {
	w := newWorld(t)
	out := w.attack("cgroup")
	assertContains(t, "walked", out, "cgroup done")
}

// TestNoSetIDFilesPlanted: a file the sandbox writes is its owner's on the host (with
// bwrap started by root, host root's, through the idmapped workspace), so a
// set-user-ID or set-group-ID bit on it would be a setuid program planted for the
// host to run. The filter refuses the bit on every call that sets a mode.
func TestNoSetIDFilesPlanted(t *testing.T) {
	w := newWorld(t)
	r := w.sh("cp /bin/sh ./suid; chmod 4755 ./suid; echo chmod=$?; chmod g+s ./suid; echo chmodg=$?; mkdir -m 2775 d; echo mkdir=$?; chmod 755 ./suid; echo plain=$?")
	for _, want := range []string{"chmod=1", "chmodg=1", "mkdir=1", "plain=0"} {
		assertContains(t, "set-id bits refused", r.stdout, want)
	}
	fi, err := os.Stat(filepath.Join(w.ws, "suid"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
		t.Fatalf("the sandbox planted a set-id file on the host: %v", fi.Mode())
	}
}

// Red team of the cold-start changes: process 1 skips its walk of /proc/sys when the
// mount table shows one read-only procfs mount there with nothing below it, and bwrap
// as root begins the run's idmap user namespace right after the backend check.

// procSysProbe lists, from inside, every path below /proc/sys (reached directly and
// through process 1's and this process's roots) that access(2) says is writable, then
// the mount table.
const procSysProbe = `for r in / /proc/self/root/ /proc/1/root/ /proc/self/task/*/root/; do
  find "${r}proc/sys" -writable 2>/dev/null | sed 's/^/WRITABLE /'
done
exec 3</proc/sys; sed -n 's/^mnt_id:[[:space:]]*/at /p' /proc/self/fdinfo/3
echo probed; cat /proc/self/mountinfo`

// procSysSkips is what process 1's skip decides from the mount table: every mount at
// /proc/sys is a read-only procfs, nothing is mounted below, and the one /proc/sys is
// reached on (mount ID at) is among them.
func procSysSkips(mountinfo string, at int) bool {
	readOnly, reached := true, false
	for _, m := range linux.ParseMountinfo(mountinfo) {
		switch {
		case m.Point == "/proc/sys":
			readOnly = readOnly && m.FSType == "proc" && m.ReadOnly()
			reached = reached || m.ID == at
		case strings.HasPrefix(m.Point, "/proc/sys/"):
			readOnly = false
		}
	}
	return reached && readOnly
}

// namespacedSysctl reports whether p is a sysctl of the sandbox's own namespaces, which
// process 1's walk lets be writable (sandboxinit namespacedSysctls).
func namespacedSysctl(p string) bool {
	for _, n := range []string{
		"/proc/sys/net/", "/proc/sys/fs/mqueue/", "/proc/sys/user/",
		"/proc/sys/kernel/hostname", "/proc/sys/kernel/domainname",
		"/proc/sys/kernel/shm", "/proc/sys/kernel/msg", "/proc/sys/kernel/sem", "/proc/sys/kernel/auto_msgmni",
		"/proc/sys/kernel/ns_last_pid", "/proc/sys/kernel/pid_max",
	} {
		if strings.HasPrefix(p, n) {
			return true
		}
	}
	return false
}

// TestColdProcSysSkipHolds: where the skip fires (root's bwrap sandbox, whose
// /proc/sys is a read-only procfs of its own, as is a contract's that shows the
// host's; every engine sandbox, whose runtime binds /proc/sys read-only), nothing
// below /proc/sys is writable by any path into it; a file system mounted below the
// host's /proc/sys does not come in.
func TestColdProcSysSkipHolds(t *testing.T) {
	check := func(t *testing.T, r result, wantSkip bool) {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("the run was refused: %v", r)
		}
		found, mi, ok := strings.Cut(r.stdout, "probed\n")
		if !ok {
			t.Fatalf("the probe did not finish: %v", r)
		}
		at := -1
		for _, l := range strings.Split(strings.TrimSpace(found), "\n") {
			if n, ok := strings.CutPrefix(l, "at "); ok {
				at, _ = strconv.Atoi(n)
			}
			p, ok := strings.CutPrefix(l, "WRITABLE ")
			if !ok {
				continue
			}
			// What the walk allows (the sandbox's own namespaces' sysctls) only where
			// the walk runs: where it is skipped, nothing at all.
			if p = p[strings.LastIndex(p, "/proc/sys"):]; wantSkip || !namespacedSysctl(p) {
				t.Fatalf("%s is writable (skip shape %v): %v", l, wantSkip, r)
			}
		}
		if at < 0 {
			t.Fatalf("no mount ID for /proc/sys: %v", r)
		}
		if skip := procSysSkips(mi, at); skip != wantSkip {
			t.Fatalf("skip shape %v; want %v in this mount table:\n%s", skip, wantSkip, mi)
		}
	}
	t.Run("bwrap", func(t *testing.T) {
		w := newWorld(t)
		// Root hands the sandbox a procfs of its own for /proc/sys; bwrap as the
		// caller's uid leaves it on /proc's mount, and process 1 walks it.
		check(t, w.sh(procSysProbe), os.Geteuid() == 0)
		w.contract("version: 1\nfilesystem:\n  readable: [\"@system\", \"/proc/sys\"]\n")
		check(t, w.sh(procSysProbe), true)
		// Below it, a bind of its own: the walk runs (and finds nothing writable).
		w.contract("version: 1\nfilesystem:\n  readable: [\"@system\", \"/proc/sys\", \"/proc/sys/kernel\"]\n")
		check(t, w.sh(procSysProbe), false)
		// The host's whole procfs over the fresh one, /proc/sys bound from it again.
		w.contract("version: 1\nfilesystem:\n  readable: [\"@system\", \"/proc\", \"/proc/sys\"]\n")
		check(t, w.sh(procSysProbe), true)
	})
	t.Run("bwrap-binfmt", func(t *testing.T) {
		testutil.RequireRoot(t)
		w := newWorld(t)
		// In a mount namespace of the test's own: the host's table is left as it is.
		cmd := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
			`mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc && exec "$0" run -- sh -c "$1"`,
			testutil.Cordon(t), procSysProbe)
		cmd.Dir, cmd.Env = w.ws, w.env
		r := runResult(t, cmd, "cordon")
		check(t, r, true)
		_, mi, _ := strings.Cut(r.stdout, "probed\n")
		for _, m := range linux.ParseMountinfo(mi) {
			if m.FSType == "binfmt_misc" {
				t.Fatalf("the host's binfmt_misc came into the sandbox at %s: %v", m.Point, r)
			}
		}
	})
	t.Run("engines", func(t *testing.T) {
		forEachContainerBackend(t, func(t *testing.T, backend string) {
			check(t, newWorld(t).sh(procSysProbe), true)
		})
	})
}
