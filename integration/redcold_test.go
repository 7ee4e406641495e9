package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/testutil"
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

// TestColdHostileMountPointNames: writable directories whose names hold what a
// mountinfo line is made of reach process 1's parser intact: the run starts (each
// grant matched its unescaped point), and the table parses to those paths and not to
// the mount a name spells. The names: a newline, then a whole line claiming a read-only procfs at
// /proc/sys; spaces and " - proc "; and the white space the kernel does not escape
// (\r, \v, \f, U+0085, U+00A0), at which a split into fields read a mount's options
// out of its path ("x,ro": a read-write mount passed as read-only) and refused every
// run that showed such a directory.
func TestColdHostileMountPointNames(t *testing.T) {
	t.Run("bwrap", hostileMountPointNames)
	t.Run("engines", func(t *testing.T) {
		forEachContainerBackend(t, func(t *testing.T, _ string) { hostileMountPointNames(t) })
	})
}

func hostileMountPointNames(t *testing.T) {
	w := newWorld(t)
	root := shortTempDir(t)
	hostile := []string{filepath.Join(root, "a\n999999 1 0:3 ", " ", "proc", "sys ro - proc proc ro\nb - proc x")}
	for i, sp := range []string{"\r", "\v", "\f", "\u0085", "\u00a0"} {
		hostile = append(hostile, filepath.Join(root, strconv.Itoa(i)+"p"+sp+"q"+sp+"x,ro"))
	}
	grants, script := `"."`, "cat /proc/self/mountinfo > mi"
	for _, h := range hostile {
		mustMkdir(t, h)
		grants += ", " + strconv.Quote(h)
		script += "; echo x > " + shellQuote(filepath.Join(h, "f"))
	}
	w.contract("version: 1\nfilesystem:\n  writable: [" + grants + "]\n")
	r := w.sh(script)
	if r.code != 0 {
		t.Fatalf("the run was refused: %v", r)
	}
	data, err := os.ReadFile(filepath.Join(w.ws, "mi"))
	if err != nil {
		t.Fatal(err)
	}
	points := map[string]linux.MountInfo{}
	for _, m := range linux.ParseMountinfo(string(data)) {
		points[m.Point] = m
	}
	for _, h := range hostile {
		if m, ok := points[h]; !ok || m.ReadOnly() {
			t.Errorf("%q did not parse back to itself, read-write (%+v):\n%s", h, m, data)
		}
	}
	for _, m := range points {
		if m.ID == 999999 {
			t.Fatalf("a directory's name parsed as a mount of its own (%+v):\n%s", m, data)
		}
	}
}

// TestColdRefusedAfterWarmStartsNothing: bwrap as root begins the idmap namespace right
// after the backend check; a run that fails after that (its credential cannot be
// minted; its sandbox cannot be staged: a ramfs cannot be idmapped) still refuses with 125, runs nothing, and leaves no child
// of cordon's behind; nor does a cordon killed -9 while its sandbox runs (gc collects
// the run).
func TestColdRefusedAfterWarmStartsNothing(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	self := testutil.Cordon(t) // an idmap child runs cordon's binary with no arguments
	// A ramfs has no idmapped mounts. (A kernel file system such as procfs is refused
	// before the warm-up, so it cannot stand in.)
	ramfs := filepath.Join(t.TempDir(), "ramfs")
	mustMkdir(t, ramfs)
	if out, err := exec.Command("mount", "-t", "ramfs", "cordon-test", ramfs).CombinedOutput(); err != nil {
		t.Fatalf("mount ramfs: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", ramfs).Run() })
	for _, c := range []struct{ what, contract, want string }{
		// Warmed, taken by Start, which fails.
		{"unstageable", "filesystem:\n  writable: [\".\", \"" + ramfs + "\"]\n", "idmap"},
		// Warmed, never taken: the run fails before its sandbox starts.
		{"unmintable", "credentials:\n  - {name: TOK, provider: exec, why: t, scope: {mint: [/bin/false], revoke: [/bin/true]}}\n", "mint command"},
	} {
		w.contract("version: 1\n" + c.contract)
		r := w.sh("touch ran")
		if r.code != 125 || !strings.Contains(r.stderr, c.want) {
			t.Fatalf("%s: want a refusal (125) naming %q, got %v", c.what, c.want, r)
		}
		assertAbsent(t, filepath.Join(w.ws, "ran"))
		if p := processesRunning(self); len(p) > 0 {
			t.Fatalf("%s: cordon's children outlived a refused run:%s", c.what, describeProcesses(p))
		}
	}

	if err := os.Remove(filepath.Join(w.ws, "cordon.yaml")); err != nil {
		t.Fatal(err)
	}
	cmd, marker := startSleeper(t, w, uniq("3197"))
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for len(processesRunning(marker))+len(processesRunning(self)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if p := append(processesRunning(marker), processesRunning(self)...); len(p) > 0 {
		t.Fatalf("left running after kill -9 of cordon:%s", describeProcesses(p))
	}
	if r := w.cordon("", "gc"); r.code != 0 || !strings.Contains(r.stdout, "removed run ") {
		t.Fatalf("gc: %v", r)
	}
}
