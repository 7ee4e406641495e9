package owner

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/testutil"
)

// inNewPIDNS starts sleep as process 1 of a pid namespace of its own, and returns it
// and the Process it would record of itself.
func inNewPIDNS(t *testing.T) (*exec.Cmd, Process) {
	t.Helper()
	testutil.RequireRoot(t)
	cmd := exec.Command("sleep", "600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	host := strconv.Itoa(cmd.Process.Pid)
	link, err := os.Readlink("/proc/" + host + "/ns/pid")
	if err != nil {
		t.Fatal(err)
	}
	ns := strings.TrimSuffix(strings.TrimPrefix(link, "pid:["), "]")
	if ns == pidNamespace() {
		t.Fatal("the child is in this process's pid namespace")
	}
	return cmd, Process{PID: 1, Start: linux.ProcessStart(cmd.Process.Pid), PIDNS: ns}
}

// TestOwnerInAnotherPIDNamespace: an owner recorded in another pid namespace (a cordon
// in a container) is alive while it runs, and gone once it has ended, judged from the
// host's pid namespace (as soon as it has exited, before it is reaped); a record naming another pid, or another start time, in its
// namespace is gone while it runs.
func TestOwnerInAnotherPIDNamespace(t *testing.T) {
	cmd, p := inNewPIDNS(t)
	testutil.Require(t, seesEveryProcess(), "this test needs root in the host's pid namespace, with its /proc")
	if !p.Alive() {
		t.Fatalf("%+v: a running owner in another pid namespace counts as gone", p)
	}
	if !aliveElsewhere(p, false) {
		t.Errorf("%+v: a running owner found in its namespace counts as gone when not every process is seen", p)
	}
	for _, q := range []Process{{PID: 2, Start: p.Start, PIDNS: p.PIDNS}, {PID: 1, Start: p.Start + 1, PIDNS: p.PIDNS}} {
		if q.Alive() {
			t.Errorf("%+v: counts as alive; its namespace's pid %d is another process (%+v)", q, q.PID, p)
		}
	}
	cmd.Process.Kill()
	for linux.ProcessStart(cmd.Process.Pid) != 0 { // not yet reaped: a zombie, in its namespace
		runtime.Gosched()
	}
	if p.Alive() {
		t.Errorf("%+v: counts as alive when it has exited and is a zombie not yet reaped", p)
	}
	cmd.Wait()
	if p.Alive() {
		t.Errorf("%+v: counts as alive after it ended and its namespace is gone", p)
	}
	if !aliveElsewhere(p, false) {
		t.Errorf("%+v: counts as gone to a process that cannot see every process", p)
	}
}
