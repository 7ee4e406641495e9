package linux

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
)

func TestCgroupKillTakesEveryMember(t *testing.T) {
	testutil.RequireRoot(t)
	cg, err := NewCgroup("test-"+t.Name(), Limits{})
	testutil.Require(t, err == nil, "a writable cgroup v2 hierarchy")
	defer cg.Remove()
	if cg.ID == 0 {
		t.Error("cgroup id is zero")
	}
	// A shell that daemonises a grandchild into its own session: cgroup membership is
	// what catches it, whatever it does with sessions and process groups.
	cmd := exec.Command("sh", "-c", "setsid sleep 319 & sleep 320")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: cg.FD()}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(cg.Procs()) < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(cg.Procs()); n < 3 {
		t.Fatalf("want 3 processes in the cgroup, got %d", n)
	}
	if err := cg.Kill(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if n := len(cg.Procs()); n != 0 {
		t.Fatalf("%d processes survived the kill", n)
	}
	if err := cg.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cg.Path); !os.IsNotExist(err) {
		t.Errorf("cgroup directory left behind: %v", err)
	}
	if err := cg.Remove(); err != nil {
		t.Errorf("Remove is not idempotent: %v", err)
	}
}

func TestParseMountinfo(t *testing.T) {
	ms := ParseMountinfo("36 35 98:0 /mnt1 /mnt/with\\040space rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n" +
		"37 35 0:33 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw\nbad line\n")
	if len(ms) != 2 {
		t.Fatalf("got %d mounts", len(ms))
	}
	if ms[0].Point != "/mnt/with space" || ms[0].FSType != "ext3" || ms[0].ReadOnly() {
		t.Errorf("%+v", ms[0])
	}
	if ms[1].FSType != "cgroup2" || ms[1].Point != "/sys/fs/cgroup/unified" {
		t.Errorf("%+v", ms[1])
	}
}
