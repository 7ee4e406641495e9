package sandbox_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/testutil"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// TestCommandCgroup: a command's cgroup is created below its sandbox's, is removed by
// Rmdir only when empty, and Kill and Remove take what is left in it.
func TestCommandCgroup(t *testing.T) {
	testutil.RequireRoot(t)
	parent, err := linux.NewCgroup("test-"+t.Name(), linux.Limits{})
	testutil.Require(t, err == nil, "a writable cgroup v2 hierarchy")
	defer parent.Remove()

	empty, err := sandbox.NewCommandCgroup(parent, "cmd-empty", -1)
	if err != nil {
		t.Fatal(err)
	}
	if empty.ID == 0 || empty.Dir == nil || !empty.Empty() {
		t.Fatalf("new command cgroup: id %d, dir %v, empty %v", empty.ID, empty.Dir, empty.Empty())
	}
	if err := empty.Rmdir(); err != nil {
		t.Fatalf("Rmdir of an empty cgroup: %v", err)
	}
	if _, err := os.Stat(filepath.Join(parent.Path, "cmd-empty")); !os.IsNotExist(err) {
		t.Errorf("Rmdir left the cgroup: %v", err)
	}

	busy, err := sandbox.NewCommandCgroup(parent, "cmd-busy", -1)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", "setsid sleep 321 & sleep 322")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(busy.Dir.Fd())}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); busy.Empty() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if busy.Empty() {
		t.Fatal("the command is not in its cgroup")
	}
	if err := busy.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if !busy.Empty() {
		t.Error("processes survived Kill")
	}
	if err := busy.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(parent.Path, "cmd-busy")); !os.IsNotExist(err) {
		t.Errorf("Remove left the cgroup: %v", err)
	}
}
