package bpfroots

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/internal/testutil"
)

// TestSweepTakesOnlyTheDead: the roots (and lock files) of a test process that
// is gone are removed; those of a live one, and roots that are not a test's, stay.
func TestSweepTakesOnlyTheDead(t *testing.T) {
	testutil.RequireRoot(t)
	if _, err := os.Stat(bpffs); err != nil {
		testutil.Require(t, false, "no bpffs at "+bpffs)
	}
	// A pid that was a process a moment ago and is not now.
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	dead := c.Process.Pid
	if err := os.MkdirAll(paths.HostDir, 0o700); err != nil {
		t.Fatal(err)
	}
	mk := func(name string) (root, lock string) {
		root, lock = filepath.Join(bpffs, name), paths.BPFLock(filepath.Join(bpffs, name))
		if err := os.Mkdir(root, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(lock, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(root); os.Remove(lock) })
		return root, lock
	}
	deadRoot, deadLock := mk(fmt.Sprintf("cordon-itest-%d-7", dead))
	deadMon, deadMonLock := mk(fmt.Sprintf("cordon-test-%d", dead))
	liveRoot, liveLock := mk(fmt.Sprintf("cordon-itest-%d-7", os.Getpid()))
	otherRoot, otherLock := mk(fmt.Sprintf("cordon-sweep-%d", dead))
	// A lock file whose root is gone already.
	orphan := paths.BPFLock(filepath.Join(bpffs, fmt.Sprintf("cordon-itest-%d-8", dead)))
	if err := os.WriteFile(orphan, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(orphan) })

	Sweep()
	for _, p := range []string{deadRoot, deadLock, deadMon, deadMonLock, orphan} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s: left (%v), want removed: its test process is gone", p, err)
		}
	}
	for _, p := range []string{liveRoot, liveLock, otherRoot, otherLock} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s: %v, want kept", p, err)
		}
	}
}
