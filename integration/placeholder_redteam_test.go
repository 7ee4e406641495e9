package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/internal/testutil"
)

// Red-team attacks on the shared-placeholder scheme (owner records list Created and
// Adopted placeholders, decided and removed under RUNROOT/placeholders.lock).

// holdPlaceholderLock takes the run root's placeholder lock as a slow run would hold
// it; release lets it go.
func (w *world) holdPlaceholderLock() (release func()) {
	w.t.Helper()
	mustMkdir(w.t, w.runRoot)
	f, err := os.OpenFile(paths.Root(w.runRoot).PlaceholderLock(), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		w.t.Fatal(err)
	}
	waitFor(w.t, time.Minute, "the placeholder lock", func() bool {
		ok, err := linux.TryLock(f)
		if err != nil {
			w.t.Fatal(err)
		}
		return ok
	})
	var once bool
	release = func() {
		if !once {
			once = true
			f.Close()
		}
	}
	w.t.Cleanup(release)
	return release
}

// recordlessRunDirs are the run directories under the run root without an owner
// record yet: runs made that wait to decide their placeholders.
func (w *world) recordlessRunDirs() []string {
	ents, _ := os.ReadDir(w.runRoot)
	var dirs []string
	for _, e := range ents {
		if !e.IsDir() || e.Name() == "sessions" || e.Name() == "gates" {
			continue
		}
		if !exists(filepath.Join(w.runRoot, e.Name(), "owner.json")) {
			dirs = append(dirs, e.Name())
		}
	}
	return dirs
}

// TestCompiledPlaceholderGoneBeforeDecide: the second run compiles while the first
// run's placeholder for .envrc is in place (so its plan asks for no placeholder there:
// the path exists), and only then waits for the placeholder lock. The first run ends
// meanwhile and, the last that lists it, removes the placeholder and its record. The
// second run then finds .envrc missing and listed by no one: it must still mask it
// (make its own placeholder, or refuse to start); its sandbox must not write .envrc.
// The wait is forced by holding the lock and stopping the second cordon while it
// waits: a slow compile or a busy machine gives the same order.
func TestCompiledPlaceholderGoneBeforeDecide(t *testing.T) {
	w := newWorld(t)
	hostGit(t, w.ws, "init", "-q")
	envrc := filepath.Join(w.ws, ".envrc")
	a := w.startRun("while [ ! -e end-a ]; do sleep 0.05; done")
	waitFor(t, time.Minute, "the first run's placeholder for .envrc", func() bool { return exists(envrc) })
	release := w.holdPlaceholderLock()
	out := filepath.Join(t.TempDir(), "b.out")
	b := exec.Command(testutil.Cordon(t), "run", "--", "sh", "-c", "echo 'echo pwned' > .envrc; echo write=$?")
	b.Dir, b.Env = w.ws, w.env
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b.Stdout, b.Stderr = f, f
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if b.ProcessState == nil {
			b.Process.Kill()
			b.Wait()
		}
	}()
	waitFor(t, time.Minute, "the second run waiting for the placeholder lock", func() bool { return len(w.recordlessRunDirs()) > 0 })
	b.Process.Signal(syscall.SIGSTOP)
	// Stopped in every thread before the lock is let go: kill(2) returns before a
	// thread running on another CPU has stopped, and that one could take the lock.
	waitFor(t, time.Minute, "the second cordon stopped", func() bool { return stopped(b.Process.Pid) })
	release()
	mustWrite(t, filepath.Join(w.ws, "end-a"), "")
	aDone := make(chan error, 1)
	go func() { aDone <- a.Wait() }()
	select {
	case err := <-aDone:
		if err != nil {
			t.Fatalf("the first run: %v", err)
		}
	case <-time.After(20 * time.Second):
		locks, _ := os.ReadFile("/proc/locks")
		st, _ := os.ReadFile("/proc/" + strconv.Itoa(b.Process.Pid) + "/stat")
		lk, _ := os.Stat(paths.Root(w.runRoot).PlaceholderLock())
		t.Logf("b=%d a=%d lock=%v\n%s\n%s", b.Process.Pid, a.Process.Pid, lk.Sys(), st, locks)
		a.Process.Signal(syscall.SIGQUIT)
		<-aDone
		t.Fatal("the first run hangs in its teardown while the second waits for the placeholder lock")
	}
	if exists(envrc) {
		t.Fatal("setup: the first run left its placeholder while the second had not adopted it")
	}
	b.Process.Signal(syscall.SIGCONT)
	b.Wait()
	got, _ := os.ReadFile(out)
	if data, err := os.ReadFile(envrc); err == nil && len(data) > 0 {
		t.Fatalf("the second sandbox wrote .envrc on the host: %q\n%s", data, got)
	}
	if strings.Contains(string(got), "write=0") {
		t.Fatalf("the second sandbox could write .envrc: %s", got)
	}
	if exists(envrc) {
		t.Errorf("an empty .envrc no run recorded is left in the workspace for ever\n%s", got)
	}
}

// stopped reports whether every thread of process pid is stopped (state T).
func stopped(pid int) bool {
	tasks, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "stat"))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, task := range tasks {
		st, err := os.ReadFile(task)
		i := strings.LastIndexByte(string(st), ')')
		if err != nil || i < 0 || i+2 >= len(st) || st[i+2] != 'T' {
			return false
		}
	}
	return true
}
