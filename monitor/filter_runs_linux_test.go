package monitor

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/linux"
)

// TestFiltersArePerRun (red team): two runs at once with different profiles: what the
// first one's filter allows (/var) is still sent and alerted in the second, whose
// profile does not; and a run killed holding its slot leaves it to the next join's
// sweep and gc, which take no live run's.
func TestFiltersArePerRun(t *testing.T) {
	requireBPF(t)
	root := cleanRoot(t)
	wide := hostProfile()
	wide.Paths = append(wide.Paths, PathRule{Path: "/var", Access: contract.ReadOnly, Why: "test"})
	a := newHarness(t, wide, Options{})
	b := newHarness(t, hostProfile(), Options{})
	const p = "/var/lib/dpkg/status"
	a.helper("open", "r:"+p)
	b.helper("open", "r:"+p)
	if _, ok := b.find(func(x Alert) bool { return x.Path == p && x.Category == CatReadOutside }); !ok {
		t.Errorf("the run without /var saw no alert for %s", p)
	}
	if _, ok := a.find(func(x Alert) bool { return x.Path == p }); ok {
		t.Errorf("the run with /var alerted on %s", p)
	}

	cg, err := linux.NewCgroup("monitor-test-filterhold-"+strconv.Itoa(os.Getpid()), linux.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Remove()
	exe, _ := os.Executable()
	cmd := exec.Command(exe, strconv.FormatUint(cg.ID, 10))
	cmd.Env = append(os.Environ(), helperEnv+"=hold")
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		t.Fatalf("holder: %q", line)
	}
	ps := pinnedSet(t, root)
	has := func(id uint64) bool {
		_, ok := heldSlot(ps, id)
		return ok
	}
	na, _ := heldSlot(ps, a.cg.ID)
	if !has(cg.ID) || !has(a.cg.ID) || !has(b.cg.ID) {
		t.Fatalf("slots held: holder %v, a %v, b %v; want all", has(cg.ID), has(a.cg.ID), has(b.cg.ID))
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if _, err := gc(context.Background(), root); err != nil {
		t.Fatal(err)
	}
	if has(cg.ID) || claimedFor(ps, cg.ID) {
		t.Error("gc left the killed run's slot claimed")
	}
	if !has(a.cg.ID) || !has(b.cg.ID) {
		t.Error("gc took a live run's slot")
	}
	b.helper("open", "r:/var/lib/dpkg/available")
	if _, ok := b.find(func(x Alert) bool { return x.Path == "/var/lib/dpkg/available" }); !ok {
		t.Error("after gc, the live run's filter no longer sends what it must")
	}
	a.m.Close()
	<-a.m.Released()
	if claimedFor(ps, a.cg.ID) || filterLen(t, ps, na) != 0 {
		t.Error("Close left the run's slot claimed, or its filter filled, once released")
	}
}
