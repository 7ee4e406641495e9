package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/internal/testutil"
)

var bpfRoots atomic.Int64

// useBPFRoot gives the worlds a bpffs root of their own ($CORDON_BPF_ROOT), so that
// what a test asserts about the pins is not another cordon's on the machine; the last
// world's gc removes what is left.
func useBPFRoot(t *testing.T, ws ...*world) string {
	t.Helper()
	root := fmt.Sprintf("/sys/fs/bpf/cordon-itest-%d-%d", os.Getpid(), bpfRoots.Add(1))
	for _, w := range ws {
		w.env = append(w.env, paths.BPFRootEnv+"="+root)
	}
	t.Cleanup(func() {
		ws[0].cordon("", "gc")
		os.Remove(root)
		os.Remove(paths.BPFLock(root))
	})
	return root
}

func pinsIn(root string) []string {
	ents, _ := os.ReadDir(root)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// TestMonitoredRunsShareThePrograms: monitored runs one after another and two at once
// (under two run roots) share one set of pinned programs, and each run's log holds its
// own alerts only.
func TestMonitoredRunsShareThePrograms(t *testing.T) {
	testutil.RequireRoot(t)
	a, b := newWorld(t), newWorld(t)
	root := useBPFRoot(t, a, b)
	for _, w := range []*world{a, b} {
		w.contract("version: 1\nmonitor: {mode: required, exec: [sh, cat, \"true\"]}\n")
	}
	if r := a.cordon("", "run", "--", "true"); r.code != 0 {
		t.Fatalf("first run: %v", r)
	}
	sets := pinsIn(root)
	if len(sets) != 1 || !strings.HasPrefix(sets[0], "v-") {
		t.Fatalf("pins after a run: %v; want one program set left attached", sets)
	}
	var wg sync.WaitGroup
	var ra, rb result
	wg.Add(2)
	go func() { defer wg.Done(); ra = a.sh("cat /etc/shadow 2>/dev/null; sleep 0.3; echo a") }()
	go func() { defer wg.Done(); rb = b.sh("cat /etc/gshadow 2>/dev/null; sleep 0.3; echo b") }()
	wg.Wait()
	if ra.code != 0 || rb.code != 0 {
		t.Fatalf("concurrent runs: %v\n%v", ra, rb)
	}
	for _, c := range []struct {
		w          *world
		mine, not_ string
	}{{a, "/etc/shadow", "/etc/gshadow"}, {b, "/etc/gshadow", "/etc/shadow"}} {
		found := false
		for _, rec := range lastRun(t, c.w) {
			if rec.Type != "syscall.alert" {
				continue
			}
			body := string(rec.Body)
			if strings.Contains(body, `"`+c.not_+`"`) {
				t.Errorf("a run's log has the other run's alert: %s", body)
			}
			found = found || strings.Contains(body, `"`+c.mine+`"`)
		}
		if !found {
			t.Errorf("no alert for %s in its run's log", c.mine)
		}
	}
	if after := pinsIn(root); len(after) != 1 || after[0] != sets[0] {
		t.Errorf("pins after the concurrent runs: %v; want %v, reused", after, sets)
	}
}

// TestKilledMonitoredCordonLeavesNoPinsAfterGC: cordon killed with SIGKILL in a
// monitored run leaves its registration with the pinned programs; gc removes it and,
// no run being left, the programs.
func TestKilledMonitoredCordonLeavesNoPinsAfterGC(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	root := useBPFRoot(t, w)
	w.contract("version: 1\nmonitor: {mode: required, exec: [sh, sleep]}\n")
	cmd := exec.Command(testutil.Cordon(t), "run", "--", "sh", "-c", "echo started > started.txt; sleep 331")
	cmd.Dir, cmd.Env = w.ws, w.env
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(filepath.Join(w.ws, "started.txt")); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(pinsIn(root)) == 0 {
		cmd.Process.Kill()
		t.Fatalf("no pins under %s while a monitored run is on", root)
	}
	cmd.Process.Kill()
	cmd.Wait()
	r := w.cordon("", "gc")
	if r.code != 0 {
		t.Fatalf("gc: %v", r)
	}
	assertContains(t, "gc", r.stdout, "removed the monitor's registration of cgroup ")
	assertContains(t, "gc", r.stdout, "removed the monitor's programs ")
	if left := pinsIn(root); len(left) != 0 {
		t.Errorf("pins left after gc: %v", left)
	}
}

// TestMonitorPinsUnreachable: the sandbox of a monitored run sees no bpffs: not the
// pinned programs, not the maps holding every run's ring buffer.
func TestMonitorPinsUnreachable(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	root := useBPFRoot(t, w)
	w.contract("version: 1\nmonitor: {mode: required}\n")
	r := w.sh("grep -c ' - bpf ' /proc/self/mountinfo; ls -a /sys/fs/bpf " + root + " 2>&1; echo end")
	if len(pinsIn(root)) == 0 {
		t.Fatalf("no pins under %s after a monitored run: %v", root, r)
	}
	if !strings.HasPrefix(r.stdout, "0\n") || strings.Contains(r.stdout, "v-") || !strings.Contains(r.stdout, "end") {
		t.Errorf("the sandbox sees a bpffs or the pins:\n%v", r)
	}
}

// TestRedBGCKeepsALiveRun: a cordon killed with SIGKILL leaves its registration with
// the shared programs; `cordon gc`, run while another monitored run is on, removes
// that one registration only: the live run keeps its programs and its ring buffer, and
// its next deviation is still in its log.
func TestRedBGCKeepsALiveRun(t *testing.T) {
	testutil.RequireRoot(t)
	dead, live := newWorld(t), newWorld(t)
	root := useBPFRoot(t, live, dead)
	for _, w := range []*world{dead, live} {
		w.contract("version: 1\nmonitor: {mode: required, exec: [sh, sleep, cat]}\n")
	}
	start := func(w *world, script string) *exec.Cmd {
		cmd := exec.Command(testutil.Cordon(t), "run", "--", "sh", "-c", script)
		cmd.Dir, cmd.Env = w.ws, w.env
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		waitFor(t, 20*time.Second, "the run to start", func() bool { return fileExists(filepath.Join(w.ws, "up.txt")) })
		return cmd
	}
	lv := start(live, "echo up > up.txt; while [ ! -e go.txt ]; do sleep 0.05; done; cat /etc/shadow; true")
	dc := start(dead, "echo up > up.txt; exec sleep 600")
	_ = dc.Process.Kill()
	_ = dc.Wait()
	r := dead.cordon("", "gc")
	if r.code != 0 {
		t.Fatalf("gc: %v", r)
	}
	if n := strings.Count(r.stdout, "removed the monitor's registration of cgroup "); n != 1 {
		t.Errorf("gc removed %d registrations; want the killed run's only:\n%s", n, r.stdout)
	}
	if strings.Contains(r.stdout, "removed the monitor's programs") || len(pinsIn(root)) == 0 {
		t.Fatalf("gc removed the programs a live run uses:\n%s", r.stdout)
	}
	mustWrite(t, filepath.Join(live.ws, "go.txt"), "go\n")
	if err := lv.Wait(); err != nil {
		t.Fatalf("the live run: %v", err)
	}
	seen := false
	for _, a := range syscallAlerts(t, lastRun(t, live)) {
		seen = seen || (a.Path == "/etc/shadow" && a.Comm == "cat")
	}
	if !seen {
		t.Errorf("the live run's read of /etc/shadow after gc raised no alert")
	}
	if r := live.cordon("", "audit", "verify", "last"); r.code != 0 {
		t.Errorf("audit verify: %v", r)
	}
}
