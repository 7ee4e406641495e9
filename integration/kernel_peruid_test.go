package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
	"github.com/cordonhq/cordon/internal/uids"
)

// held is a `cordon run` of the attack program whose command holds until the file
// "release" appears in its workspace.
type held struct {
	w        *world
	cmd      *exec.Cmd
	out, err bytes.Buffer
	done     chan struct{}
}

// startHeld starts `cordon run -- ./attack mode` in w and waits for the command to
// write the file ready in the workspace.
func startHeld(t *testing.T, w *world, mode, ready string) *held {
	t.Helper()
	w.attacker()
	h := &held{w: w, done: make(chan struct{})}
	h.cmd = exec.Command(testutil.Cordon(t), "run", "--", "./attack", mode)
	h.cmd.Dir, h.cmd.Env = w.ws, w.env
	h.cmd.Stdout, h.cmd.Stderr = &h.out, &h.err
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { h.cmd.Wait(); close(h.done) }()
	t.Cleanup(func() { h.release(t) })
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := os.Stat(filepath.Join(w.ws, ready)); err == nil {
			return h
		}
		select {
		case <-h.done:
			t.Fatalf("attack %s ended before it was ready: exit %v\nstdout: %s\nstderr: %s", mode, h.cmd.ProcessState, &h.out, &h.err)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("attack %s not ready after a minute", mode)
		}
	}
}

// release lets the command end and waits for cordon.
func (h *held) release(t *testing.T) {
	_ = os.WriteFile(filepath.Join(h.w.ws, "release"), nil, 0o644)
	select {
	case <-h.done:
	case <-time.After(time.Minute):
		h.cmd.Process.Kill()
		<-h.done
		t.Errorf("cordon did not end a minute after its command was released")
	}
}

// hostUIDOf is the host uid (real uid, /proc/PID/status seen from the host) of the
// process running exactly cmdline; it fails the test unless there is one.
func hostUIDOf(t *testing.T, cmdline string) int {
	t.Helper()
	pids := processesRunning(cmdline)
	if len(pids) != 1 {
		t.Fatalf("%d processes run %q; want 1%s", len(pids), cmdline, describeProcesses(pids))
	}
	data, err := os.ReadFile("/proc/" + pids[0] + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			uid, _ := strconv.Atoi(strings.Fields(rest)[0])
			return uid
		}
	}
	t.Fatalf("no Uid line for %q", cmdline)
	return 0
}

// leaseOf is the lease of uid in the host's lease directory, and whether there is one.
func leaseOf(uid int) (uids.Record, bool) {
	data, err := os.ReadFile(filepath.Join(uids.DefaultDir, strconv.Itoa(uid)))
	var rec uids.Record
	if err != nil || json.Unmarshal(data, &rec) != nil {
		return rec, false
	}
	return rec, true
}

// TestTenantsShareNoPerUIDKernelLimit (bwrap; TestContainerTenantsShareNoPerUIDKernelLimit
// runs it on docker and containerd, whose root-workspace containers lease too): two concurrent runs of root-owned workspaces run as
// different host uids of cordon's range, each leased to its run alone, so a run that
// takes every inotify instance its uid may have (fs.inotify.max_user_instances is
// counted per host uid, across user namespaces) leaves the other run its own. Once
// the runs end and gc has run, no lease of theirs is left, no process runs as either
// uid, and no file in the host's shared temporary places is theirs.
func TestTenantsShareNoPerUIDKernelLimit(t *testing.T) {
	testutil.RequireRoot(t)
	hog, other := newWorld(t), newWorld(t)
	h := startHeld(t, hog, "inotify-hog", "hogged")
	o := startHeld(t, other, "inotify-one", "ready")

	hogUID, otherUID := hostUIDOf(t, "./attack inotify-hog"), hostUIDOf(t, "./attack inotify-one")
	if hogUID == otherUID {
		t.Errorf("both runs are host uid %d: they share every per-uid kernel limit", hogUID)
	}
	for uid, run := range map[int]*held{hogUID: h, otherUID: o} {
		if !uids.DefaultRange.Contains(uid) {
			t.Errorf("a run is host uid %d, outside cordon's range %s", uid, uids.DefaultRange)
		}
		if rec, ok := leaseOf(uid); !ok || rec.Owner.PID != run.cmd.Process.Pid || rec.Run == "" {
			t.Errorf("uid %d has no lease owned by its run's cordon (pid %d) while the run goes on: %+v", uid, run.cmd.Process.Pid, rec)
		}
	}
	h.release(t)
	o.release(t)
	if !strings.Contains(o.out.String(), "inotify_init ok") {
		t.Errorf("the other tenant's run could not make an inotify instance while the hog held its uid's:\nhog: %s\nother: %s%s", &h.out, &o.out, &o.err)
	}
	if !strings.Contains(h.out.String(), "too many open files") {
		t.Errorf("the hog did not reach its uid's limit (the attack proves nothing): %s%s", &h.out, &h.err)
	}
	for _, c := range []struct {
		w   *world
		uid int
	}{{hog, hogUID}, {other, otherUID}} {
		if r := c.w.cordon("", "audit", "show", "last"); !strings.Contains(r.stdout, "sandbox uid "+strconv.Itoa(c.uid)+"\n") {
			t.Errorf("audit show does not name the run's host uid %d: %v", c.uid, r)
		}
	}

	if r := hog.cordon("", "gc"); r.code != 0 {
		t.Fatalf("cordon gc: %v", r)
	}
	for _, uid := range []int{hogUID, otherUID} {
		if rec, ok := leaseOf(uid); ok {
			t.Errorf("uid %d is still leased after its run ended and gc: %+v", uid, rec)
		}
	}
	assertNothingOwnedBy(t, hogUID, otherUID)
}

// assertNothingOwnedBy fails when a process runs as one of ids or a file in the
// host's shared temporary places (and POSIX message queues, shared memory) is one's:
// the next run leased that uid must find nothing of the last one's.
func assertNothingOwnedBy(t *testing.T, ids ...int) {
	t.Helper()
	var match []string
	for i, uid := range ids {
		if p := processesOf(uid); len(p) > 0 {
			t.Errorf("processes still run as uid %d after its run:%s", uid, describeProcesses(p))
		}
		if i > 0 {
			match = append(match, "-o")
		}
		match = append(match, "-uid", strconv.Itoa(uid), "-o", "-gid", strconv.Itoa(uid))
	}
	var places []string
	for _, p := range []string{"/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue", "/run"} {
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			places = append(places, p)
		}
	}
	args := append(append(append(places, "-xdev", "("), match...), ")", "-print")
	out, _ := exec.Command("find", args...).Output()
	if s := strings.TrimSpace(string(out)); s != "" {
		t.Errorf("files of uids %v left on the host after their runs: %s", ids, s)
	}
}

// TestLeaseOfKilledCordonTakenBack (bwrap): a cordon killed with SIGKILL cannot
// release its sandbox's host uid; cordon gc takes the lease back once that cordon and
// its sandbox's processes are gone (any cordon's start runs the same gc, so another
// test's may take it first).
func TestLeaseOfKilledCordonTakenBack(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	h := startHeld(t, w, "inotify-one", "ready")
	uid := hostUIDOf(t, "./attack inotify-one")
	rec, ok := leaseOf(uid)
	if !ok || rec.Owner.PID != h.cmd.Process.Pid {
		t.Fatalf("uid %d: lease %+v (%v); want one owned by cordon (pid %d)", uid, rec, ok, h.cmd.Process.Pid)
	}
	_ = h.cmd.Process.Kill()
	<-h.done
	// The sandbox dies with cordon; its bwrap, reparented to the host's init, stays a
	// zombie of uid until init reaps it, and a uid that still has a process (a zombie
	// still counts against its RLIMIT_NPROC) is not taken back.
	deadline := time.Now().Add(time.Minute)
	for len(processesOf(uid)) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if p := processesOf(uid); len(p) > 0 {
		t.Fatalf("the sandbox of a killed cordon still runs as uid %d a minute later:%s", uid, describeProcesses(p))
	}
	if r := w.cordon("", "gc"); r.code != 0 {
		t.Fatalf("cordon gc: %v", r)
	}
	if rec, ok := leaseOf(uid); ok {
		t.Errorf("uid %d is still leased after its cordon was killed and gc ran: %+v", uid, rec)
	}
	assertNothingOwnedBy(t, uid)
}

// processesOf lists the host pids with uid as their real, effective, saved or
// file-system uid, zombies included.
func processesOf(uid int) []string {
	var out []string
	u := strconv.Itoa(uid)
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		data, err := os.ReadFile(filepath.Join("/proc", d.Name(), "status"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if rest, ok := strings.CutPrefix(line, "Uid:"); ok && slices.Contains(strings.Fields(rest), u) {
				out = append(out, d.Name())
			}
		}
	}
	return out
}

// TestStagedChangesNotLeftToTheLeasedUID (bwrap): a staged run's change set waits in
// the audit root after the run, when its host uid is leased to the next run: what the
// sandbox wrote there (as that uid) is the workspace owner's by then, and apply lands
// it as before.
func TestStagedChangesNotLeftToTheLeasedUID(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	r := w.cordon("", "run", "--stage", "--", "sh", "-c", "id -u > made.txt; mkdir dir; echo x > dir/f; ln -s made.txt link")
	if r.code != 0 {
		t.Fatalf("staged run: %v", r)
	}
	show := w.cordon("", "audit", "show", "last")
	_, rest, ok := strings.Cut(show.stdout, "sandbox uid ")
	uid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(rest, "\n", 2)[0]))
	if !ok || err != nil || !uids.DefaultRange.Contains(uid) {
		t.Fatalf("audit show names no leased sandbox uid: %v", show)
	}
	out, err := exec.Command("find", w.auditRoot(), "(", "-uid", strconv.Itoa(uid), "-o", "-gid", strconv.Itoa(uid), ")", "-print").Output()
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Errorf("the kept change set holds files of uid %d, leased to the next run (%v): %s", uid, err, out)
	}
	assertNothingOwnedBy(t, uid)
	id := strings.Fields(strings.TrimPrefix(show.stdout, "run "))[0]
	if a := w.cordon("", "apply", id); a.code != 0 {
		t.Fatalf("apply: %v", a)
	}
	for _, p := range []string{"made.txt", "dir", "dir/f", "link"} {
		st, err := os.Lstat(filepath.Join(w.ws, p))
		if err != nil || st.Sys().(*syscall.Stat_t).Uid != 0 {
			t.Errorf("%s after apply: %v, %v; want it landed as root's", p, st, err)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(w.ws, "made.txt")); strings.TrimSpace(string(got)) != strconv.Itoa(uid) {
		t.Errorf("made.txt = %q; the sandbox ran as uid %q, not the uid run.start names (%d)", got, got, uid)
	}
}

// TestContainerTenantsShareNoPerUIDKernelLimit: the same two tenants on docker and
// containerd.
func TestContainerTenantsShareNoPerUIDKernelLimit(t *testing.T) {
	forEachContainerBackend(t, func(t *testing.T, _ string) { TestTenantsShareNoPerUIDKernelLimit(t) })
}
