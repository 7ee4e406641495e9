package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Attacks on what cordon takes for its own placeholders: only the entry a run made
// (its identity, recorded once made) is ever removed or adopted, never an empty file
// or directory the user made at a path a run recorded.

// stopWhen starts `cordon run -- sh -c script` (after prepare), stops its cordon
// (SIGSTOP) as soon as at says the moment has come, and returns it stopped when in
// then says the moment was caught; otherwise it kills that run and tries again, a
// hundred times at most (a moment between two steps a run takes microseconds apart is
// missed more often than not on a busy machine; each try is a few tens of ms).
func (w *world) stopWhen(script string, prepare func(), at, in func() bool) *exec.Cmd {
	w.t.Helper()
	for range 100 {
		prepare()
		cmd := w.startRun(script)
		deadline := time.Now().Add(time.Minute)
		for !at() && time.Now().Before(deadline) {
		}
		cmd.Process.Signal(syscall.SIGSTOP)
		if in() {
			return cmd
		}
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		w.cordon("", "gc")
	}
	w.t.Fatal("the moment to stop cordon at was never caught in a hundred runs")
	return nil
}

// runRecords are the owner records of the runs under the run root.
func (w *world) runRecords() []string {
	m, _ := filepath.Glob(filepath.Join(w.runRoot, "2*", "owner.json"))
	return m
}

// TestUsersDirsAtUnmadeParentsSurviveGC: a run records the missing parents a and a/b
// of its placeholder a/b/secret, and its cordon is killed before it makes them. The
// user then makes a/b, empty. Neither a later run in the workspace nor `cordon gc`
// may take a/b or a for the dead run's parents and remove them.
func TestUsersDirsAtUnmadeParentsSurviveGC(t *testing.T) {
	w := newWorld(t)
	w.contract("version: 1\nfilesystem:\n  deny_read: [a/b/secret]\n")
	a, ab := filepath.Join(w.ws, "a"), filepath.Join(w.ws, "a", "b")
	// Stopped between its record (naming a and a/b) and its placeholders.
	cmd := w.stopWhen("true", func() {}, func() bool { return len(w.runRecords()) > 0 }, func() bool { return len(w.runRecords()) > 0 && !exists(a) })
	mustMkdir(t, ab) // the user's, empty
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if r := w.sh("cat a/b/secret 2>/dev/null; echo x > a/b/secret; echo write=$?"); r.code != 0 {
		t.Fatalf("a later run: %v", r)
	}
	if !exists(ab) {
		t.Fatalf("a later run (or the clean-up it starts with) removed the user's empty %s, which a killed run had recorded and never made", ab)
	}
	if r := w.cordon("", "gc"); r.code != 0 {
		t.Fatalf("gc: %v", r)
	}
	for _, d := range []string{ab, a} {
		if !exists(d) {
			t.Errorf("gc removed the user's empty directory %s, which a killed run had recorded and never made", d)
		}
	}
}

// TestUsersFileAtReleasedPlaceholderSurvivesGC: a run removes its .envrc placeholder at
// its end, and its cordon is killed before its run directory (and the record naming
// .envrc) goes. The user then makes an empty .envrc of their own: `cordon gc` must not
// take it for the dead run's placeholder.
func TestUsersFileAtReleasedPlaceholderSurvivesGC(t *testing.T) {
	w := newWorld(t)
	hostGit(t, w.ws, "init", "-q")
	envrc := filepath.Join(w.ws, ".envrc")
	end := filepath.Join(w.ws, "end")
	cmd := w.stopWhen("while [ ! -e end ]; do sleep 0.01; done",
		func() { os.Remove(end) },
		func() bool {
			if exists(envrc) {
				if _, err := os.Stat(end); err != nil {
					mustWrite(t, end, "") // up: tell it to end
				}
				return false
			}
			return exists(end)
		},
		func() bool { return !exists(envrc) && len(w.runRecords()) > 0 })
	mustWrite(t, envrc, "") // the user's, empty
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if r := w.cordon("", "gc"); r.code != 0 {
		t.Fatalf("gc: %v", r)
	}
	if !exists(envrc) {
		t.Fatal("gc removed the user's empty .envrc, made after the killed run had removed its placeholder")
	}
}
