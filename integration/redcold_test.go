package integration

import (
	"strconv"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/linux"
)

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
// process 1's walk lets be writable (internal/pid1 namespacedSysctls).
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

// TestColdProcSysSkipHolds: where the skip fires (a contract that shows the host's
// /proc/sys read-only on bwrap; every engine sandbox, whose runtime binds /proc/sys
// read-only), nothing below /proc/sys is writable by any path into it, and in bwrap's
// own shape (no mount at /proc/sys) the skip does not fire at all.
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
		check(t, w.sh(procSysProbe), false)
		w.contract("version: 1\nfilesystem:\n  readable: [\"@system\", \"/proc/sys\"]\n")
		check(t, w.sh(procSysProbe), true)
		// Below it, a bind of its own: the walk runs (and finds nothing writable).
		w.contract("version: 1\nfilesystem:\n  readable: [\"@system\", \"/proc/sys\", \"/proc/sys/kernel\"]\n")
		check(t, w.sh(procSysProbe), false)
		// The host's whole procfs over the fresh one, /proc/sys bound from it again.
		w.contract("version: 1\nfilesystem:\n  readable: [\"@system\", \"/proc\", \"/proc/sys\"]\n")
		check(t, w.sh(procSysProbe), true)
	})
	t.Run("engines", func(t *testing.T) {
		forEachContainerBackend(t, func(t *testing.T, backend string) {
			check(t, newWorld(t).sh(procSysProbe), true)
		})
	})
}
