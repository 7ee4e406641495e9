package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/testutil"
)

func TestTimeoutKillsWholeTree(t *testing.T) {
	w := newWorld(t)
	// Sleeps of this run's own lengths: the same test runs on other backends at the
	// same time (CI's lanes), and its sleeps must not be taken for this one's.
	base := 300000 + 4*int(time.Now().UnixNano()%100000)
	sleeps := []string{"sleep " + strconv.Itoa(base), "sleep " + strconv.Itoa(base+1), "sleep " + strconv.Itoa(base+2), "sleep " + strconv.Itoa(base+3)}
	start := time.Now()
	r := w.sh(sleeps[0]+" & setsid "+sleeps[1]+" & (trap '' TERM HUP; "+sleeps[2]+") & "+sleeps[3], "--timeout", "1s")
	if r.code != 124 {
		t.Fatalf("want exit 124 on timeout, got %v", r)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("timeout took %s", d)
	}
	assertContains(t, "stderr", r.stderr, "cordon: command timed out after 1s")
	for _, s := range sleeps {
		if p := processesMatching(s); len(p) > 0 {
			t.Errorf("%q is still running after the timeout (pids %v)", s, p)
		}
	}
}

func TestSignalToCordonTearsDown(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			w := newWorld(t)
			marker := "sleep 3" + strconv.Itoa(int(sig)) + "17"
			cmd := exec.Command(testutil.Cordon(t), "run", "--", "sh", "-c", "setsid "+marker+" & "+marker+"; echo")
			cmd.Dir, cmd.Env = w.ws, w.env
			var errb bytes.Buffer
			cmd.Stderr = &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Both sleeps run: the command is running (cordon's and bwrap's own
			// command lines name the marker too, and they exist before it runs).
			waitFor(t, 10*time.Second, "the command's two sleeps", func() bool { return len(processesRunning(marker)) >= 2 })
			_ = cmd.Process.Signal(sig)
			err := cmd.Wait()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != 128+int(sig) {
				t.Fatalf("want exit %d, got %v (stderr %q)", 128+int(sig), err, errb.String())
			}
			if p := processesMatching(marker); len(p) > 0 {
				t.Errorf("%q still running after cordon exited: %v", marker, p)
			}
		})
	}
}

func TestKilledCordonLeavesNothingAfterGC(t *testing.T) {
	w := newWorld(t)
	marker := "sleep 318"
	cmd := exec.Command(testutil.Cordon(t), "run", "--", "sh", "-c", "setsid "+marker+" & "+marker)
	cmd.Dir, cmd.Env = w.ws, w.env
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The two sleeps themselves: cordon's and bwrap's command lines name them too, and
	// killing cordon before its sandbox ran left gc no run to remove.
	waitFor(t, 30*time.Second, "the two "+marker, func() bool { return len(processesRunning(marker)) == 2 })
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	// bwrap dies with its parent; the pid namespace takes everything with it.
	deadline := time.Now().Add(5 * time.Second)
	for len(processesMatching(marker)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if p := processesMatching(marker); len(p) > 0 {
		t.Fatalf("%q still running after kill -9 of cordon: %v", marker, p)
	}
	// The placeholder for .git and the run directory remain until gc.
	r := w.cordon("", "gc")
	if r.code != 0 {
		t.Fatalf("gc: %v", r)
	}
	assertContains(t, "gc", r.stdout, "removed run ")
	assertAbsent(t, filepath.Join(w.ws, ".git"))
}

// TestRunAfterKill9InTheSameWorkspace: a crashed run's placeholders are cleaned up
// before the next run compiles its contract, so they never pass for real paths.
func TestRunAfterKill9InTheSameWorkspace(t *testing.T) {
	w := newWorld(t)
	cmd := exec.Command(testutil.Cordon(t), "run", "--", "sh", "-c", "echo started > started.txt; sleep 323")
	cmd.Dir, cmd.Env = w.ws, w.env
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(filepath.Join(w.ws, "started.txt")); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Kill()
	cmd.Wait()
	r := w.sh("mkdir .git/x 2>&1; echo next run")
	if r.code != 0 || !strings.Contains(r.stdout, "next run") {
		t.Fatalf("the run after a kill -9 in the same workspace failed: %v", r)
	}
	assertContains(t, ".git still protected", r.stdout, "Read-only file system")
	assertAbsent(t, filepath.Join(w.ws, ".git"))
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

// Red-team attacks on a one-command bwrap run's early start (runner/early.go): bwrap
// and process 1 start while the monitor attaches, the baseline is taken and cmd.start
// is written; the command must run nothing before all three are done.

// runEvents is the type sequence of the last run's log and its fs.diff (if any).
func runEvents(t *testing.T, w *world) ([]string, *audit.FSDiff) {
	t.Helper()
	var types []string
	var diff *audit.FSDiff
	for _, rec := range lastRun(t, w) {
		types = append(types, string(rec.Type))
		if rec.Type == "fs.diff" {
			diff = new(audit.FSDiff)
			if err := rec.DecodeBody(diff); err != nil {
				t.Fatal(err)
			}
		}
	}
	return types, diff
}

// TestRedRunEarlyTinyTimeout: a 1ms timeout ends the run while the sandbox is still
// starting. Whatever the command got to do before the timeout is in the diff, after a
// cmd.start; nothing is left running.
func TestRedRunEarlyTinyTimeout(t *testing.T) {
	w := newWorld(t)
	w.contract("version: 1\ncommands: {timeout: 1ms}\n")
	marker := filepath.Join(w.ws, "ran")
	for round := range 3 {
		os.Remove(marker)
		r := w.sh("touch " + marker + "; exec sleep 1234.5")
		if r.code != 124 {
			t.Errorf("round %d: exit %d; want 124 (timeout): %v", round, r.code, r)
		}
		if p := processesRunning("sleep 1234.5"); len(p) > 0 {
			t.Errorf("round %d: left running: %v", round, p)
		}
		types, diff := runEvents(t, w)
		joined := strings.Join(types, " ")
		if types[len(types)-1] != "run.end" {
			t.Errorf("round %d: log not sealed: %s", round, joined)
		}
		_, err := os.Lstat(marker)
		t.Logf("round %d: marker made: %v; log: %s", round, err == nil, joined)
		if err != nil {
			continue // the command never ran: nothing to account for
		}
		found := false
		if diff != nil {
			for _, c := range diff.Changes {
				found = found || c.Path == "ran"
			}
		}
		if !found || !strings.Contains(joined, "cmd.start") {
			t.Errorf("round %d: the command ran (marker made) but the log does not show it: %s, diff %+v", round, joined, diff)
		}
	}
	if p := processesWithCwd(w.ws); len(p) > 0 {
		t.Errorf("processes left in the workspace: %v", p)
	}
}
