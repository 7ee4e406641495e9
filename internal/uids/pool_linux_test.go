package uids

import (
	"errors"
	"os/exec"
	"syscall"
	"testing"

	"github.com/cordonhq/cordon/internal/testutil"
)

// TestAcquireSkipsIDsAHostProcessRuns: a uid a host process runs as (an account /etc
// does not list: NSS, a pod's runAsUser) is never leased, nor one that a process has
// as its gid: that process could read, signal and trace the sandbox.
func TestAcquireSkipsIDsAHostProcessRuns(t *testing.T) {
	testutil.RequireRoot(t)
	p := testPool(t, 3)
	for _, cred := range []*syscall.Credential{{Uid: uint32(p.Range.Base), Gid: 65534}, {Uid: 65534, Gid: uint32(p.Range.Base + 1)}} {
		cmd := exec.Command("sleep", "600")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
	l, err := p.Acquire("run0")
	if err != nil {
		t.Fatal(err)
	}
	if want := p.Range.Base + 2; l.UID() != want {
		t.Fatalf("leased uid %d; want %d, the one no host process runs as", l.UID(), want)
	}
	if l, err := p.Acquire("run1"); !errors.Is(err, ErrExhausted) {
		t.Fatalf("a second lease: got %v, %v; want ErrExhausted (the other two run host processes)", l, err)
	}
}
