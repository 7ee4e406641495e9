package monitor

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/linux"
)

// TestInFlightEventStaysWithItsRun (red team, rtmon): a program of run A that found A's
// entry in `runs` before A left must not send its event to another run as that run's
// own. The programs take the slot and the ticket from the entry at submit time, and a
// hash map's deleted element is reused at once by the next update (no grace period),
// so run B registering just after A left may be handed A's element. Each round below
// is A leaving and a new run B (same slot and ticket as the harness b) registering,
// then A put back for the next round, while A's workload opens as fast as it can. A
// record of A's workload accepted by b (its ticket) is A's event read as b's.
func TestInFlightEventStaysWithItsRun(t *testing.T) {
	requireBPF(t)
	root := cleanRoot(t)
	a := newHarness(t, hostProfile(), Options{})
	b := newHarness(t, hostProfile(), Options{})
	p := pinnedSet(t, root)
	var ra, rb monitorRun
	if err := p.runs.Lookup(a.cg.ID, &ra); err != nil {
		t.Fatal(err)
	}
	if err := p.runs.Lookup(b.cg.ID, &rb); err != nil {
		t.Fatal(err)
	}
	if ra.Slot == rb.Slot || ra.Ticket == rb.Ticket {
		t.Fatalf("a and b share slot %d or ticket %x", ra.Slot, ra.Ticket)
	}
	exe, _ := os.Executable()
	// A bounded flood: every record a reads is kept in memory (the harness), and an
	// unbounded one under -race grew the test past 20 GB.
	w := a.command(append(os.Environ(), helperEnv+"=rate"), exe, "400000", "0")
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	flooding := make(chan struct{})
	go func() { w.Wait(); close(flooding) }()
	t.Cleanup(func() { w.Process.Kill(); <-flooding })
	const fakeB = 1<<62 + 12345 // a cgroup id no run has: the new run B
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	stolen := func() (n int) {
		_, recs := b.got()
		for _, r := range recs {
			if int(r.PID) == w.Process.Pid {
				n++
			}
		}
		return n
	}
	rounds := 0
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && stolen() == 0 && !closed(flooding) {
		for i := 0; i < 200; i++ {
			if err := p.runs.Delete(a.cg.ID); err != nil { // A leaves
				t.Fatal(err)
			}
			if err := p.runs.Update(uint64(fakeB), rb, ebpf.UpdateNoExist); err != nil { // B registers
				t.Fatal(err)
			}
			p.runs.Delete(uint64(fakeB))
			if err := p.runs.Update(a.cg.ID, ra, ebpf.UpdateNoExist); err != nil {
				t.Fatal(err)
			}
			rounds++
		}
	}
	_, recsA := a.got()
	if len(recsA) == 0 {
		t.Fatal("run a read none of its workload's events: the test proves nothing")
	}
	if n := stolen(); n > 0 {
		t.Errorf("%d of run a's events (pid %d) were read by run b as its own, in %d leave/register rounds", n, w.Process.Pid, rounds)
	}
	t.Logf("%d rounds; a read %d records, b foreign %d", rounds, len(recsA), b.m.Stats().Foreign)
}

// crashRun leaves h's run as a SIGKILLed cordon would leave it to the next run's sweep:
// out of runs, its claim gone, its ring buffer and filter as they were. It returns the
// slot.
func crashRun(t *testing.T, p *pinned, m *Monitor, cg uint64) uint32 {
	t.Helper()
	n, ok := heldSlot(p, cg)
	if !ok {
		t.Fatalf("cgroup %d holds no slot", cg)
	}
	if _, err := m.pins.leave(context.Background(), cg); err != nil {
		t.Fatal(err)
	}
	if err := p.claims.Delete(n); err != nil {
		t.Fatal(err)
	}
	// A crashed cordon reads nothing more: a reader left running would take the next
	// run's records from the ring buffer they share (and drop them as foreign).
	// (Not waited for: a test's reader may be held in its record hook.)
	m.rd.Close()
	return n
}

// filterOf is slot n's filter as user space would fill it: path key to value.
func filterOf(t *testing.T, p *pinned, n uint32) map[string]uint8 {
	t.Helper()
	var id ebpf.MapID
	if err := p.filters.Lookup(n, &id); err != nil {
		t.Fatal(err)
	}
	m, err := ebpf.NewMapFromID(id)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	got := map[string]uint8{}
	var key [4 + filterKeyData]byte
	var v uint8
	it := m.Iterate()
	for it.Next(&key, &v) {
		bits := binary.NativeEndian.Uint32(key[:])
		got[string(key[4:4+bits/8])] = v
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestStaleFilterValueIsReplaced (red team, rtmon): a run that crashed leaves its slot's
// filter allowing writes under a directory; the next run of that slot has the same
// directory read-only. The entry's key is the same, only its value differs: the next
// run's filter must be exactly its own, and its write there alerted, not filtered.
func TestStaleFilterValueIsReplaced(t *testing.T) {
	requireBPF(t)
	root := cleanRoot(t)
	dir := t.TempDir()
	a := newHarness(t, hostProfile(dir), Options{})
	p := pinnedSet(t, root)
	n := crashRun(t, p, a.m, a.cg.ID)
	if got := filterOf(t, p, n); got[dir+"/"] == 0 {
		t.Fatalf("the crashed run's filter %v has no entry for %s: the test proves nothing", got, dir)
	}
	ro := FromPlan(&contract.Plan{Mounts: []contract.Mount{
		{Path: "/usr", Access: contract.ReadOnly, Why: "@system"},
		{Path: "/etc", Access: contract.ReadOnly, Why: "@system"},
		{Path: dir, Access: contract.ReadOnly, Why: "test"},
	}, Links: []contract.Link{{Path: "/bin", Target: "usr/bin"}, {Path: "/lib", Target: "usr/lib"}, {Path: "/lib64", Target: "usr/lib64"}}})
	b := newHarness(t, ro, Options{})
	if b.m.slot.n != n {
		t.Fatalf("the next run took slot %d, not the crashed run's %d", b.m.slot.n, n)
	}
	want, ok := filterEntries(&ro)
	if !ok {
		t.Fatal("the read-only profile has no filter")
	}
	if got := filterOf(t, p, n); !maps.Equal(got, want) {
		t.Errorf("the next run's filter %v; want its own %v", got, want)
	}
	b.helper("open", "w:"+filepath.Join(dir, "x"))
	alerts, _ := b.got()
	found := false
	for _, al := range alerts {
		found = found || al.Path == filepath.Join(dir, "x")
	}
	if !found {
		t.Errorf("a write under the read-only %s raised no alert: %+v", dir, alerts)
	}
}

// TestLostIsPerRun (red team, rtmon): a run that flooded its small ring buffer and lost
// events crashes; the next run of the slot, same ring buffer, starts with none lost
// and reads its own events.
func TestLostIsPerRun(t *testing.T) {
	requireBPF(t)
	root := cleanRoot(t)
	cg, err := linux.NewCgroup(fmt.Sprintf("monitor-test-rtlost-%d", os.Getpid()), linux.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Remove()
	stuck := make(chan struct{})
	var once sync.Once
	unstick := func() { once.Do(func() { close(stuck) }) }
	a, err := Start(context.Background(), Options{CgroupID: cg.ID, Profile: hostProfile(), ringSize: 4096, onRecord: func(Record) { <-stuck }})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { unstick(); a.Close(); <-a.Released() }()
	exe, _ := os.Executable()
	flood := exec.Command(exe, "2000", "0")
	flood.Env = append(os.Environ(), helperEnv+"=rate")
	flood.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: cg.FD()}
	if out, err := flood.CombinedOutput(); err != nil {
		t.Fatalf("flood: %v %s", err, out)
	}
	p := pinnedSet(t, root)
	flooded := p.counters(cg.ID).Lost
	if flooded == 0 {
		t.Fatal("the flooding run lost nothing: the test proves nothing")
	}
	n := crashRun(t, p, a, cg.ID)
	b := newHarness(t, hostProfile(), Options{ringSize: 4096})
	if b.m.slot.n != n {
		t.Fatalf("the next run took slot %d, not the crashed run's %d", b.m.slot.n, n)
	}
	if lost := b.m.Stats().Lost; lost != 0 {
		t.Fatalf("the next run starts with %d lost: the crashed run's %d", lost, flooded)
	}
	// Its own events (20 opens and the helper's start) may overflow the small ring on
	// a loaded machine; what it counts lost is then its own, far fewer than the flood's.
	b.helper("rate", "20", "0")
	s := b.m.Stats()
	if s.Lost >= flooded {
		t.Errorf("the next run counts %d lost: the crashed run's %d", s.Lost, flooded)
	}
	if s.Events == 0 {
		t.Errorf("the next run read none of its own events: %+v", s)
	}
}

// closed reports whether c is closed.
func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
