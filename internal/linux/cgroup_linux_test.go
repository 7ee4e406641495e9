package linux

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
)

func TestCgroupKillTakesEveryMember(t *testing.T) {
	testutil.RequireRoot(t)
	cg, err := NewCgroup(fmt.Sprintf("test-%s-%d", t.Name(), os.Getpid()), Limits{})
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
	// What the kernel leaves unescaped in a path and strings.Fields would split at:
	// a read-write mount whose name would read as options "x,ro".
	for _, sp := range []string{"\r", "\v", "\f", "\u0085", "\u00a0"} {
		point := "/w/p" + sp + "q" + sp + "x,ro"
		ms := ParseMountinfo("38 35 98:0 " + point + " " + point + " rw,noatime - ext4 /dev/root rw\n")
		if len(ms) != 1 || ms[0].Point != point || ms[0].ReadOnly() || ms[0].ID != 38 || ms[0].FSType != "ext4" {
			t.Errorf("%q: %+v", sp, ms)
		}
	}
}

// TestChildAndIdleCgroups: a child cgroup takes a process cloned into it and is killed
// with it; IdleCgroups lists a cgroup only when nothing is in it or below it, and
// RemoveIdleCgroup removes it with its children but never one with a process.
func TestChildAndIdleCgroups(t *testing.T) {
	testutil.RequireRoot(t)
	name := "test-idle-" + strconv.Itoa(os.Getpid())
	cg, err := NewCgroup(name, Limits{})
	testutil.Require(t, err == nil, "a writable cgroup v2 hierarchy")
	defer cg.Remove()
	for _, bad := range []string{"", ".", "..", "../beside", "a/b"} {
		if c, err := cg.Child(bad, -1); err == nil {
			c.Remove()
			t.Errorf("Child(%q) made %s: a child must be a direct one", bad, c.Path)
		}
	}
	child, err := cg.Child("cmd-1", -1)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "321")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(child.Dir().Fd())}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(IdleCgroups(0, time.Now().Add(time.Hour)), name) {
		t.Error("a cgroup whose child holds a process is listed as idle")
	}
	if err := RemoveIdleCgroup(name); err == nil {
		t.Fatal("RemoveIdleCgroup removed a busy cgroup")
	}
	if err := child.Kill(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if slices.Contains(IdleCgroups(0, time.Now().Add(-time.Hour)), name) {
		t.Error("an emptied cgroup made just now (a run still starting) is listed as idle for an hour-old cutoff")
	}
	if !slices.Contains(IdleCgroups(0, time.Now().Add(time.Hour)), name) {
		t.Error("an emptied cgroup is not listed as idle")
	}
	if err := RemoveIdleCgroup(name); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cg.Path); !os.IsNotExist(err) {
		t.Errorf("idle cgroup left: %v", err)
	}
}

// TestCgroupUsableAfterKill: a process cloned into a cgroup after Kill emptied it runs
// (a session's next command goes into the cgroup its previous one was killed in). With
// cgroup.kill, some kernels (6.18) kill such a process at birth.
func TestCgroupUsableAfterKill(t *testing.T) {
	testutil.RequireRoot(t)
	cg, err := NewCgroup(fmt.Sprintf("test-%s-%d", t.Name(), os.Getpid()), Limits{})
	testutil.Require(t, err == nil, "a writable cgroup v2 hierarchy")
	defer cg.Remove()
	start := func(script string) *exec.Cmd {
		cmd := exec.Command("sh", "-c", script)
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: cg.FD()}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	first := start("sleep 322")
	waitProcs(t, cg.Path, 1)
	if err := cg.Kill(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	next := start("exit 7")
	if err := next.Wait(); err == nil || next.ProcessState.ExitCode() != 7 {
		t.Fatalf("a process cloned into the cgroup after Kill: %v; want exit status 7", err)
	}
	if data, _ := os.ReadFile(cg.Path + "/cgroup.freeze"); len(data) > 0 && data[0] != '0' {
		t.Errorf("Kill left the cgroup frozen: cgroup.freeze %q", data)
	}
}

// TestCgroupKillReachesBelowAndForkers: Kill takes the processes of the cgroups below
// it, and a process that keeps forking, and leaves the subtree unpopulated.
func TestCgroupKillReachesBelowAndForkers(t *testing.T) {
	testutil.RequireRoot(t)
	cg, err := NewCgroup(fmt.Sprintf("test-%s-%d", t.Name(), os.Getpid()), Limits{})
	testutil.Require(t, err == nil, "a writable cgroup v2 hierarchy")
	defer cg.Remove()
	child, err := cg.Child("cmd-1", -1)
	if err != nil {
		t.Fatal(err)
	}
	below := exec.Command("sleep", "323")
	below.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(child.Dir().Fd())}
	forker := exec.Command("sh", "-c", "while :; do sleep 324 & done")
	forker.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: cg.FD()}
	for _, c := range []*exec.Cmd{below, forker} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	waitProcs(t, child.Path, 1)
	waitProcs(t, cg.Path, 10)
	if err := cg.Kill(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	_, _ = below.Wait(), forker.Wait()
	if n := len(child.Procs()) + len(cg.Procs()); n != 0 || cg.populated() {
		t.Fatalf("%d processes survived the kill (populated %v)", n, cg.populated())
	}
}

// waitProcs waits until the cgroup directory dir holds at least n processes.
func waitProcs(t *testing.T, dir string, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for len(readProcs(dir)) < n {
		if time.Now().After(deadline) {
			t.Fatalf("want %d processes in %s, got %d", n, dir, len(readProcs(dir)))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestCgroupKillRefusesItsOwnCgroup: Kill of a cgroup the caller is in is refused
// before anything is frozen or killed. It runs in a helper process alone in a fresh
// cgroup, so that a regression kills only the helper.
func TestCgroupKillRefusesItsOwnCgroup(t *testing.T) {
	testutil.RequireRoot(t)
	if os.Getenv("CORDON_TEST_KILL_OWN_CGROUP") == "1" {
		cg, err := NewCgroup(fmt.Sprintf("test-own-%d", os.Getpid()), Limits{})
		if err != nil {
			fmt.Println("setup:", err)
			return
		}
		if err := writeFile(cg.Path+"/cgroup.procs", strconv.Itoa(os.Getpid())); err != nil {
			fmt.Println("setup:", err)
			return
		}
		fmt.Println("kill:", cg.Kill(time.Second))
		parent := cg.Path[:len(cg.Path)-len("/test-own-")-len(strconv.Itoa(os.Getpid()))]
		_ = writeFile(parent+"/cgroup.procs", strconv.Itoa(os.Getpid()))
		_ = cg.Remove()
		return
	}
	_, err := NewCgroup(fmt.Sprintf("test-probe-%d", os.Getpid()), Limits{})
	testutil.Require(t, err == nil, "a writable cgroup v2 hierarchy")
	_ = RemoveCgroup(fmt.Sprintf("test-probe-%d", os.Getpid()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCgroupKillRefusesItsOwnCgroup$")
	cmd.Env = append(os.Environ(), "CORDON_TEST_KILL_OWN_CGROUP=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the helper killing its own cgroup: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "holds cordon itself") {
		t.Fatalf("Kill of the caller's own cgroup: %s; want it refused", out)
	}
}

// TestKillRefusesNonPositivePids: 0 and -1 (the caller's group, everything) are
// never signalled through Kill.
func TestKillRefusesNonPositivePids(t *testing.T) {
	for _, pid := range []int{0, -1} {
		if err := Kill(pid, 0); err != syscall.EINVAL {
			t.Errorf("Kill(%d, 0) = %v; want EINVAL", pid, err)
		}
	}
	if err := KillNamespace(); err != syscall.EPERM {
		t.Errorf("KillNamespace outside process 1 = %v; want EPERM", err)
	}
}

// A process forked by a thread that joined the v1 limit cgroups (JoinV1) starts in
// them, and the thread is back where it was after leave; AddV1 moves a process forked
// outside them, and tells the two apart.
func TestJoinV1StartsChildrenInside(t *testing.T) {
	testutil.RequireRoot(t)
	cg, err := NewCgroup(fmt.Sprintf("test-%s-%d", t.Name(), os.Getpid()), Limits{Memory: 256 << 20, Pids: 64})
	testutil.Require(t, err == nil, "a writable cgroup v2 hierarchy")
	t.Cleanup(func() { // last, once the processes below are gone
		if err := cg.Remove(); err != nil {
			t.Error(err)
		}
	})
	testutil.Require(t, cg.NeedsV1(), "memory and pids controllers on cgroup v1 (a hybrid host): nothing to join")
	start := func(cmd *exec.Cmd) *exec.Cmd {
		t.Helper()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	var inside *exec.Cmd
	err = OnOwnThread(func() error {
		before, err := os.ReadFile("/proc/thread-self/cgroup")
		if err != nil {
			return err
		}
		leave, err := cg.JoinV1()
		if err != nil {
			return err
		}
		inside = start(exec.Command("sleep", "321"))
		if err := leave(); err != nil {
			return err
		}
		if after, _ := os.ReadFile("/proc/thread-self/cgroup"); string(after) != string(before) {
			return fmt.Errorf("the thread is not back where it was:\n%s\nwant\n%s", after, before)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	outside := start(exec.Command("sleep", "322"))
	self, _ := procCgroups("self")
	for i, c := range cg.ctrl {
		in, err := procCgroups(strconv.Itoa(inside.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		if in[c] != cg.rel[i] || !strings.HasSuffix(cg.rel[i], "/cordon/"+filepath.Base(cg.Path)) {
			t.Errorf("the process forked by the joined thread is in %s:%s, want %s", c, in[c], cg.rel[i])
		}
		if self[c] == cg.rel[i] {
			t.Errorf("cordon itself is in the run's %s cgroup", c)
		}
	}
	if !cg.inV1(inside.Process.Pid) || cg.inV1(outside.Process.Pid) {
		t.Fatalf("inV1: forked inside %v, outside %v; want true, false", cg.inV1(inside.Process.Pid), cg.inV1(outside.Process.Pid))
	}
	if err := cg.AddV1(inside.Process.Pid, outside.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if !cg.inV1(outside.Process.Pid) {
		t.Fatal("AddV1 left the process forked outside where it was")
	}
}

// TestIdleV1CgroupsCollected: the v1 limit cgroups of a run killed before its teardown
// outlive its v2 cgroup once gc removed that one; IdleCgroups lists their name and
// RemoveIdleCgroup removes them, but never while a process is in one.
func TestIdleV1CgroupsCollected(t *testing.T) {
	testutil.RequireRoot(t)
	name := fmt.Sprintf("test-idle-v1-%d", os.Getpid())
	cg, err := NewCgroup(name, Limits{Memory: 256 << 20, Pids: 64})
	testutil.Require(t, err == nil, "a writable cgroup v2 hierarchy")
	t.Cleanup(func() { _ = cg.Remove() })
	testutil.Require(t, cg.NeedsV1(), "memory and pids controllers on cgroup v1 (a hybrid host): no v1 cgroups to leave")
	cg.dir.Close()
	cg.dir = nil
	if err := os.Remove(cg.Path); err != nil { // what gc's v2-only removal left
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	if !slices.Contains(IdleCgroups(0, later), name) {
		t.Fatalf("v1 cgroups %v without their v2 cgroup are not listed as idle", cg.v1)
	}
	if slices.Contains(IdleCgroups(0, time.Now().Add(-time.Hour)), name) {
		t.Error("v1 cgroups made just now are listed as idle for an hour-old cutoff")
	}
	cmd := exec.Command("sleep", "321")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if err := cg.AddV1(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(IdleCgroups(0, later), name) {
		t.Error("a v1 cgroup holding a process is listed as idle")
	}
	if err := RemoveIdleCgroup(name); err == nil {
		t.Fatal("RemoveIdleCgroup removed a v1 cgroup holding a process")
	}
	for _, d := range cg.v1 {
		if _, err := os.Stat(d); err != nil {
			t.Fatalf("a busy v1 cgroup is gone: %v", err)
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if err := RemoveIdleCgroup(name); err != nil {
		t.Fatal(err)
	}
	for _, d := range cg.v1 {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("idle v1 cgroup %s left: %v", d, err)
		}
	}
	if err := RemoveIdleCgroup("../x"); err == nil {
		t.Error("RemoveIdleCgroup took a name with a slash")
	}
}
