package monitor

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/paths"
)

// cleanRoot removes every pin of the tests' root, so that a test starts from nothing.
func cleanRoot(t *testing.T) string {
	t.Helper()
	root := paths.BPFRoot()
	if _, err := gc(context.Background(), root); err != nil {
		t.Fatalf("gc: %v", err)
	}
	t.Cleanup(func() { gc(context.Background(), root) })
	return root
}

func setDirs(t *testing.T, root string) []string {
	t.Helper()
	ents, _ := os.ReadDir(root)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// TestConcurrentRunsSeeOnlyTheirOwn: two runs starting at once load the programs once,
// and each reads exactly its own events, all of them, while the other floods its own.
func TestConcurrentRunsSeeOnlyTheirOwn(t *testing.T) {
	requireBPF(t)
	root := cleanRoot(t)
	before := loads.Load()
	hs := make([]*harness, 2)
	var wg sync.WaitGroup
	for i := range hs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hs[i] = newHarness(t, hostProfile(), Options{})
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if n := loads.Load() - before; n != 1 {
		t.Errorf("two runs starting at once loaded the programs %d times; want 1", n)
	}
	if dirs := setDirs(t, root); len(dirs) != 1 || !strings.HasPrefix(dirs[0], setPrefix) {
		t.Errorf("pins under %s: %v; want one program set", root, dirs)
	}
	exe, _ := os.Executable()
	const n = 20000
	counts := [2]int{} // opens of /dev/null each helper made
	for i, h := range hs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := h.command(append(os.Environ(), helperEnv+"=rate"), exe, strconv.Itoa(n*(i+1)), "0")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("helper %d: %v %s", i, err, out)
			}
			counts[i] = n * (i + 1)
		}()
	}
	wg.Wait()
	for i, h := range hs {
		_, records := h.got()
		mine := 0
		for _, r := range records {
			if r.Cgroup != h.cg.ID {
				t.Fatalf("run %d got a record of cgroup %d (its own is %d): %+v", i, r.Cgroup, h.cg.ID, r)
			}
			if r.Syscall == SysOpenat && string(r.Str[0]) == ratePath {
				mine++
			}
		}
		// Every event of its own is either read or counted lost: a flood faster than
		// a loaded machine lets the reader drain may lose some (the run's log says so,
		// never silently), which is the monitor's capacity (make bench), not this
		// isolation's.
		s := h.m.Stats()
		if mine > counts[i] || mine+int(s.Lost) < counts[i] {
			t.Errorf("run %d: %d opens of %s recorded, %d lost; want %d, each recorded or lost", i, mine, ratePath, s.Lost, counts[i])
		}
		if s.Lost != 0 {
			t.Logf("run %d: %d of %d events lost (a loaded machine)", i, s.Lost, counts[i])
		}
	}
}

// TestLaterRunsReuseThePrograms: a run after another loads nothing and attaches
// nothing; its Close leaves the programs attached for the next one, and gc detaches
// them once no run is left.
func TestLaterRunsReuseThePrograms(t *testing.T) {
	requireBPF(t)
	root := cleanRoot(t)
	h := newHarness(t, hostProfile(), Options{})
	if err := h.m.Close(); err != nil {
		t.Fatal(err)
	}
	pinsBefore := setDirs(t, root)
	before := loads.Load()
	h2 := newHarness(t, hostProfile(), Options{})
	if n := loads.Load() - before; n != 0 {
		t.Errorf("a second run loaded the programs %d times; want 0", n)
	}
	h2.run(nil, "/usr/bin/cat", "/etc/shadow")
	if _, ok := h2.find(func(a Alert) bool { return a.Path == "/etc/shadow" }); !ok {
		t.Error("the second run saw no alert for /etc/shadow")
	}
	h2.m.Close()
	if after := setDirs(t, root); !slices.Equal(after, pinsBefore) || len(after) != 1 {
		t.Errorf("pins %v after the last run; want the set left attached (%v)", after, pinsBefore)
	}
	col, err := gc(context.Background(), root)
	if err != nil || len(col.Sets) != 1 || len(col.Stale) != 0 {
		t.Errorf("gc with no run: %+v, %v; want the one set removed, no stale registration", col, err)
	}
	if left := setDirs(t, root); len(left) != 0 {
		t.Errorf("pins left after gc: %v", left)
	}
}

// TestKilledOwnerIsCollected: a cordon killed with SIGKILL leaves its registration;
// the next run drops it, and gc removes it and then the programs.
func TestKilledOwnerIsCollected(t *testing.T) {
	requireBPF(t)
	root := cleanRoot(t)
	cg, err := linux.NewCgroup("monitor-test-hold-"+strconv.Itoa(os.Getpid()), linux.Limits{})
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
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "ready\n" {
		cmd.Process.Kill()
		t.Fatalf("holder: %q", line)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	col, err := gc(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	if len(col.Stale) != 1 || col.Stale[0].Cgroup != cg.ID || col.Stale[0].Owner != cmd.Process.Pid || len(col.Sets) != 1 {
		t.Errorf("gc after SIGKILL: %+v; want cgroup %d of pid %d and the set removed", col, cg.ID, cmd.Process.Pid)
	}
	if left := setDirs(t, root); len(left) != 0 {
		t.Errorf("pins left after gc: %v", left)
	}
}

// TestForeignProgramRefused: a set whose attached program is not the one cordon loaded
// (same name, another tag) is not reused; gc removes it when no run uses it.
func TestForeignProgramRefused(t *testing.T) {
	requireBPF(t)
	root := cleanRoot(t)
	h := newHarness(t, hostProfile(), Options{})
	h.m.Close()
	dir := filepath.Join(root, setName())
	pin := filepath.Join(dir, linkPrefix+"tp_openat-sys_enter_openat")
	if err := os.Remove(pin); err != nil {
		t.Fatal(err)
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "tp_openat", Type: ebpf.TracePoint, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	l, err := link.Tracepoint("syscalls", "sys_enter_openat", prog, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Pin(pin); err != nil {
		t.Fatal(err)
	}
	l.Close()
	cg, err := linux.NewCgroup("monitor-test-foreign-"+strconv.Itoa(os.Getpid()), linux.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Remove()
	_, err = Start(context.Background(), Options{CgroupID: cg.ID})
	if err == nil || !strings.Contains(err.Error(), "not cordon's") {
		t.Fatalf("Start over a foreign program: %v; want a refusal", err)
	}
	if col, err := gc(context.Background(), root); err != nil || len(col.Sets) != 1 {
		t.Errorf("gc: %+v, %v; want the set removed", col, err)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s left after gc: %v", dir, err)
	}
}

// pinnedSet opens the tests' set of programs.
func pinnedSet(t *testing.T, root string) *pinned {
	t.Helper()
	p, err := openPinned(root, filepath.Join(root, setName()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// heldSlot is the slot the run of cgroup id holds: its entry in runs names a slot
// claimed for that cgroup, with a ring buffer and a filter.
func heldSlot(p *pinned, id uint64) (uint32, bool) {
	var r monitorRun
	if p.runs.Lookup(id, &r) != nil {
		return 0, false
	}
	var c monitorClaim
	var ring, filter ebpf.MapID
	ok := p.claims.Lookup(r.Slot, &c) == nil && c.Cgroup == id &&
		p.rings.Lookup(r.Slot, &ring) == nil && p.filters.Lookup(r.Slot, &filter) == nil
	return r.Slot, ok
}

// claimedFor reports whether some slot is claimed for cgroup id.
func claimedFor(p *pinned, id uint64) bool {
	var n uint32
	var c monitorClaim
	it := p.claims.Iterate()
	for it.Next(&n, &c) {
		if c.Cgroup == id {
			return true
		}
	}
	return false
}

// filterLen counts the entries of slot n's path filter.
func filterLen(t *testing.T, p *pinned, n uint32) int {
	t.Helper()
	var id ebpf.MapID
	if err := p.filters.Lookup(n, &id); err != nil {
		t.Fatalf("slot %d has no filter: %v", n, err)
	}
	m, err := ebpf.NewMapFromID(id)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	return countEntries(m)
}

// TestCloseReleasesLater: Close takes the run out of the programs' runs at once, and
// its slot is free, its filter empty and its ring buffer kept for the next run, by the
// time Released is closed; a claim a live cordon holds between leaving and releasing
// is never taken by the next run.
func TestCloseReleasesLater(t *testing.T) {
	requireBPF(t)
	root := cleanRoot(t)
	wide := hostProfile()
	wide.Paths = append(wide.Paths, PathRule{Path: "/var", Access: contract.ReadOnly, Why: "test"})
	h := newHarness(t, wide, Options{})
	id := h.m.opts.CgroupID
	p := pinnedSet(t, root)
	n, ok := heldSlot(p, id)
	if !ok {
		t.Fatal("a running monitor holds no slot")
	}
	if filterLen(t, p, n) == 0 {
		t.Fatal("the run's filter is empty: the test proves nothing")
	}
	if err := h.m.Close(); err != nil {
		t.Fatal(err)
	}
	var r monitorRun
	if err := p.runs.Lookup(id, &r); !errors.Is(err, ebpf.ErrKeyNotExist) {
		t.Errorf("the run is still registered once Close returned: %v", err)
	}
	<-h.m.Released()
	if err := h.m.ReleaseErr(); err != nil {
		t.Fatal(err)
	}
	if claimedFor(p, id) || filterLen(t, p, n) != 0 {
		t.Error("the run's slot is still claimed, or its filter not empty, once Released is closed")
	}
	var ring ebpf.MapID
	if err := p.rings.Lookup(n, &ring); err != nil {
		t.Errorf("the released slot lost its ring buffer: %v", err)
	}
	// The same cgroup again, at once: the release under way must not take out the
	// new registration.
	again, err := Start(context.Background(), Options{CgroupID: id, Nested: true, Profile: hostProfile()})
	if err != nil {
		t.Fatal(err)
	}
	again.Close()
	if again2, err := Start(context.Background(), Options{CgroupID: id, Nested: true, Profile: hostProfile()}); err != nil {
		t.Fatal(err)
	} else {
		<-again.Released()
		if _, ok := heldSlot(p, id); !ok {
			t.Error("a monitor started on a cgroup whose last monitor was still releasing lost its slot")
		}
		again2.Close()
		<-again2.Released()
	}

	// A live cordon between leaving and releasing keeps its slot.
	h2 := newHarness(t, hostProfile(), Options{})
	id2 := h2.m.opts.CgroupID
	n2, _ := heldSlot(p, id2)
	if _, err := h2.m.pins.leave(context.Background(), id2); err != nil {
		t.Fatal(err)
	}
	h3 := newHarness(t, hostProfile(), Options{})
	n3, ok := heldSlot(p, h3.m.opts.CgroupID)
	if !ok || n3 == n2 || !claimedFor(p, id2) {
		t.Errorf("the next run took slot %d (ok %v) beside the left run's %d (still claimed: %v)", n3, ok, n2, claimedFor(p, id2))
	}
	h2.m.Close()
	<-h2.m.Released()
	if claimedFor(p, id2) {
		t.Error("the left run's slot is still claimed once released")
	}
}
