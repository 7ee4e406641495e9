package uids

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/owner"
	"github.com/cordonhq/cordon/internal/testutil"
)

// TestLeaseOfOwnerInEndedPIDNamespaceTakenBack: a lease whose owner ran in another
// pid namespace (a cordon in a container sharing /run/cordon) is kept while that owner
// runs, and taken back by Reclaim (cordon gc) once it has ended, instead of staying
// leased for ever.
func TestLeaseOfOwnerInEndedPIDNamespaceTakenBack(t *testing.T) {
	testutil.RequireRoot(t)
	cmd := exec.Command("sleep", "600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	link, err := os.Readlink("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/ns/pid")
	if err != nil {
		t.Fatal(err)
	}
	o := owner.Process{PID: 1, Start: linux.ProcessStart(cmd.Process.Pid), PIDNS: strings.TrimSuffix(strings.TrimPrefix(link, "pid:["), "]")}
	p := testPool(t, 4)
	l, err := p.acquire(o, "contained")
	if err != nil {
		t.Fatal(err)
	}
	if freed, err := p.Reclaim(); err != nil || len(freed) != 0 {
		t.Fatalf("Reclaim with the owner running in its pid namespace: freed %v, %v; want nothing", freed, err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	freed, err := p.Reclaim()
	if err != nil || len(freed) != 1 || freed[0] != l.UID() {
		t.Fatalf("Reclaim after the owner and its pid namespace ended: freed %v, %v; want [%d]", freed, err, l.UID())
	}
}
