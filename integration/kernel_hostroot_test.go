package integration

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/testutil"
)

// rootScript is what TestContainerRootWorkspace runs in a workspace root owns: it
// reports, prints process 1's cgroup and "ready", then waits (bounded) for the host's
// "go" file.
const rootScript = `id -u; id -g
echo made > out.txt
echo more >> secret.txt && echo secret-appended
touch suid && chmod 4755 suid || echo suid-refused
touch /pwned || echo root-refused
echo x > EXTRA/new || echo extra-refused
ls /proc/1/fd && echo FD-LISTED
cat /proc/1/environ && echo ENVIRON-READ
awk -v d="$PWD" '$5 == d { print "wsflags " $6 }' /proc/self/mountinfo
cat /proc/1/cgroup
echo ready
i=0; while [ ! -e go ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done`

// TestContainerRootWorkspace: a workspace root owns never gives a container that is
// host root (issue 34, section 7). The command and process 1 run as an unprivileged
// host uid, seen from the host; root's files in the workspace are the sandbox's, and
// what it writes there lands owned by root; nothing outside is writable; process 1's
// descriptors and environment stay closed; doctor passes every check; a staged run
// works; and a cordon killed mid-run leaves, after gc, the workspace whole and
// nothing mounted.
func TestContainerRootWorkspace(t *testing.T) {
	image := requireEngines(t)
	forEachContainerBackend(t, func(t *testing.T, backend string) {
		w := newWorld(t)
		if uid, _, err := linux.Owner(w.ws); err != nil || uid != 0 {
			t.Fatalf("the workspace must be root's: uid %d, %v", uid, err)
		}
		extra := filepath.Join(filepath.Dir(w.ws), "extra")
		mustMkdir(t, extra)
		if err := os.Chmod(extra, 0o777); err != nil {
			t.Fatal(err)
		}
		secret := filepath.Join(w.ws, "secret.txt")
		mustWrite(t, secret, "old\n")
		if err := os.Chmod(secret, 0o600); err != nil {
			t.Fatal(err)
		}
		w.imageContract(image, "filesystem:\n  readable: ["+extra+"]\n")

		cmd := exec.Command(testutil.Cordon(t), "run", "--", "sh", "-c", strings.ReplaceAll(rootScript, "EXTRA", extra))
		cmd.Dir, cmd.Env = w.ws, w.env
		var stderr strings.Builder
		cmd.Stderr = &stderr
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var lines []string
		sc := bufio.NewScanner(stdout)
		for sc.Scan() && sc.Text() != "ready" {
			lines = append(lines, sc.Text())
		}
		// From the host: every process of the container, process 1 included.
		procs := containerProcesses(t, lines)
		mustWrite(t, filepath.Join(w.ws, "go"), "")
		for sc.Scan() {
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("cordon run: %v\nstdout: %q\nstderr: %s", err, lines, stderr.String())
		}
		out := strings.Join(lines, "\n") + "\n"
		if len(lines) < 2 || lines[0] == "0" || lines[1] == "0" {
			t.Fatalf("want the command to run as a uid:gid other than root's, got %q\nstderr: %s", lines, stderr.String())
		}
		if len(procs) < 2 {
			t.Fatalf("want process 1 and the command in the container's cgroup, found %v", procs)
		}
		for pid, uids := range procs {
			for _, u := range uids {
				if u == "0" {
					t.Errorf("container process %s runs as host uid 0 (Uid: %v)", pid, uids)
				}
			}
		}
		// What the sandbox creates is root's on disk: a set-user-ID bit would plant a
		// setuid-root program in the workspace.
		if st, err := os.Stat(filepath.Join(w.ws, "suid")); err != nil {
			t.Errorf("suid on the host: %v", err)
		} else if st.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			t.Errorf("suid on the host: %v; want it without a set-user-ID bit", st.Mode())
		}
		for _, want := range []string{"secret-appended", "suid-refused", "root-refused", "extra-refused"} {
			assertContains(t, "stdout", out, want+"\n")
		}
		// The workspace, bound from cordon's idmapped clone, is nosuid and nodev on
		// every engine (docker's writable binds have no such flags of their own).
		for _, flag := range []string{"nosuid", "nodev", "idmapped"} {
			assertContains(t, "the workspace's mount flags", out, flag)
		}
		assertContains(t, "stdout", out, "wsflags ")
		for _, bad := range []string{"FD-LISTED", "ENVIRON-READ"} {
			if strings.Contains(out, bad) {
				t.Errorf("process 1 reachable: %s\n%s", bad, out)
			}
		}
		assertContains(t, "stderr", stderr.String(), "'/proc/1/fd': Permission denied")
		assertContains(t, "stderr", stderr.String(), "'/proc/1/environ': Permission denied")
		for _, p := range []string{filepath.Join(w.ws, "out.txt"), secret} {
			if uid, gid, err := linux.Owner(p); err != nil || uid != 0 || gid != 0 {
				t.Errorf("%s on the host: uid:gid %d:%d, %v; want root's, the workspace owner's", p, uid, gid, err)
			}
		}
		if data, _ := os.ReadFile(secret); string(data) != "old\nmore\n" {
			t.Errorf("secret.txt: %q; want the command's line appended", data)
		}
		assertAbsent(t, filepath.Join(extra, "new"))
		assertNoMountsBelow(t, w.runRoot)

		w.doctor(backend)

		// Staged: the overlay's lower layer is idmapped too.
		r := w.sh("id -u; echo staged > staged.txt && echo staged-ok", "--stage")
		if r.code != 0 || strings.HasPrefix(r.stdout, "0\n") {
			t.Fatalf("staged run: %v", r)
		}
		assertContains(t, "stdout", r.stdout, "staged-ok")
		assertAbsent(t, filepath.Join(w.ws, "staged.txt"))
		assertNoMountsBelow(t, w.runRoot)

		killedRun(t, w)
	})
}

// killedRun kills cordon with SIGKILL while its container runs from the idmapped
// workspace, then has gc clean up: the workspace's files stay, nothing stays mounted.
func killedRun(t *testing.T, w *world) {
	t.Helper()
	keep := filepath.Join(w.ws, "keep.txt")
	mustWrite(t, keep, "the owner's\n")
	cmd := exec.Command(testutil.Cordon(t), "run", "--", "sh", "-c", "echo ready; sleep 300")
	cmd.Dir, cmd.Env = w.ws, w.env
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() && sc.Text() != "ready" {
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	if r := w.cordon("", "gc"); r.code != 0 {
		t.Fatalf("cordon gc: %v", r)
	}
	if data, err := os.ReadFile(keep); err != nil || string(data) != "the owner's\n" {
		t.Fatalf("after gc of the killed run, the workspace's file: %q, %v", data, err)
	}
	assertNoMountsBelow(t, w.runRoot)
}

// containerProcesses lists, from the host, the processes in the cgroup (pids
// controller) that lines' copy of /proc/1/cgroup names, and below it, with the uids
// of their status.
func containerProcesses(t *testing.T, lines []string) map[string][]string {
	t.Helper()
	rel := ""
	for _, l := range lines {
		if f := strings.SplitN(l, ":", 3); len(f) == 3 && f[1] == "pids" {
			rel = f[2]
		}
	}
	if rel == "" || rel == "/" {
		t.Fatalf("no pids cgroup path for process 1 in %q", lines)
	}
	procs := map[string][]string{}
	_ = filepath.WalkDir(filepath.Join("/sys/fs/cgroup/pids", rel), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.Name() != "cgroup.procs" {
			return nil
		}
		data, _ := os.ReadFile(p)
		for _, pid := range strings.Fields(string(data)) {
			status, _ := os.ReadFile(filepath.Join("/proc", pid, "status"))
			for _, line := range strings.Split(string(status), "\n") {
				if k, v, _ := strings.Cut(line, ":"); k == "Uid" {
					procs[pid] = strings.Fields(v)
				}
			}
		}
		return nil
	})
	return procs
}

// assertNoMountsBelow fails when anything is still mounted below dir (a run's
// idmapped sources or staged overlay), waiting a bounded time for a teardown.
func assertNoMountsBelow(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		data, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			t.Fatal(err)
		}
		var below []string
		for _, m := range linux.ParseMountinfo(string(data)) {
			if strings.HasPrefix(m.Point, dir+"/") {
				below = append(below, m.Point)
			}
		}
		if len(below) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still mounted below %s: %v", dir, below)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestRedIdmapFailureIsAnError (red team, issue 34 §7): on docker and containerd, a
// root-owned writable source cordon cannot idmap (here a directory with an overlay
// mounted in it) made MountIdmapped's cleanup call its nil named result: cordon
// panicked (exit 2, a stack trace) instead of refusing the run with the reason, and
// the run's uid lease stayed until the next gc.
func TestRedIdmapFailureIsAnError(t *testing.T) {
	image := requireEngines(t)
	forEachContainerBackend(t, func(t *testing.T, backend string) {
		w := newWorld(t)
		base := t.TempDir()
		src := filepath.Join(base, "src")
		for _, d := range []string{"lower", "upper", "work", "src/ovl"} {
			mustMkdir(t, filepath.Join(base, d))
		}
		opts := "lowerdir=" + filepath.Join(base, "lower") + ",upperdir=" + filepath.Join(base, "upper") + ",workdir=" + filepath.Join(base, "work")
		if out, err := exec.Command("mount", "-t", "overlay", "overlay", "-o", opts, filepath.Join(src, "ovl")).CombinedOutput(); err != nil {
			testutil.Require(t, false, fmt.Sprintf("no overlay mount here: %v %s", err, out))
		}
		t.Cleanup(func() { _ = exec.Command("umount", "-l", filepath.Join(src, "ovl")).Run() })
		w.imageContract(image, "filesystem:\n  writable: [\".\", \""+src+"\"]\n")
		r := w.sh("echo ran")
		if r.code == 0 || r.code == 2 || strings.Contains(r.stderr, "panic:") {
			t.Errorf("a writable source that cannot be idmapped must refuse the run (125) with the reason, not crash: %v", r)
		}
		if !strings.Contains(r.stderr, "idmap") {
			t.Errorf("the refusal does not say why: %v", r)
		}
		data, _ := os.ReadFile("/proc/self/mountinfo")
		if strings.Contains(string(data), " "+w.runRoot+"/") {
			t.Errorf("a mount is left below the run root %s", w.runRoot)
		}
	})
}
