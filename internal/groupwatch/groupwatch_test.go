package groupwatch

import (
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/cordonhq/cordon/internal/linux"
)

// TestMain runs the watcher when the test binary is re-executed as one.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "internal" && os.Args[2] == Arg {
		os.Exit(Main(os.Args[3:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "holder" {
		holder()
	}
	os.Exit(m.Run())
}

// holder is cordon in TestKilledHolder: it starts a group whose stdout is its fd 3 and
// a watcher for it, says so, and waits to be killed.
func holder() {
	cmd := exec.Command("/bin/sh", "-c", "sleep 300 & wait")
	cmd.Stdout = os.NewFile(3, "alive")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		os.Exit(1)
	}
	if _, err := Start(os.Args[0], cmd.Process.Pid); err != nil {
		os.Exit(1)
	}
	os.Stdout.WriteString("ready\n")
	select {}
}

// TestKilledHolder: a process holding a watcher (cordon) that is SIGKILLed takes its
// group with it.
func TestKilledHolder(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	h := exec.Command(os.Args[0], "holder")
	h.ExtraFiles = []*os.File{w}
	out, err := h.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	err = h.Start()
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(out, make([]byte, len("ready\n"))); err != nil {
		t.Fatalf("the holder did not start: %v", err)
	}
	if err := h.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = h.Wait()
	if n, err := io.Copy(io.Discard, r); n != 0 || err != nil { // EOF: every holder is dead
		t.Errorf("reading the group's pipe: %d bytes, %v", n, err)
	}
}

// group starts a process group of a shell and a background child, as a sandbox is. The
// returned pipe reads EOF once both are dead (each holds its write end as stdout).
func group(t *testing.T) (*exec.Cmd, *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	cmd := exec.Command("/bin/sh", "-c", "sleep 300 & wait")
	cmd.Stdout = w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = linux.KillGroup(cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	return cmd, r
}

// TestDeathKillsGroup: when the lifeline's write end closes (as it does when cordon
// dies, SIGKILL included), the watcher kills the whole group.
func TestDeathKillsGroup(t *testing.T) {
	g, alive := group(t)
	w, err := Start(os.Args[0], g.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Kill(); err != nil {
		t.Fatal(err)
	}
	err = g.Wait()
	if ws, ok := g.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the group's leader ended with %v; want SIGKILL", err)
	}
	if n, err := io.Copy(io.Discard, alive); n != 0 || err != nil { // EOF: every holder is dead
		t.Errorf("reading the group's pipe: %d bytes, %v", n, err)
	}
}

// TestRelease: a released watcher exits without touching the group.
func TestRelease(t *testing.T) {
	g, _ := group(t)
	w, err := Start(os.Args[0], g.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Release(); err != nil {
		t.Fatal(err)
	}
	if err := linux.KillGroup(g.Process.Pid, 0); err != nil {
		t.Errorf("the group is gone after Release: %v", err)
	}
}

// TestBadArgs: the watcher refuses what is not one process group id above 1 (kill(-1)
// would reach everything).
func TestBadArgs(t *testing.T) {
	for _, args := range [][]string{nil, {"1"}, {"0"}, {"-5"}, {"x"}, {"2", "3"}} {
		if code := Main(args); code != 2 {
			t.Errorf("Main(%q) = %d; want 2", args, code)
		}
	}
}
