package monitor

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/owner"
)

// TestSlotReuseIsClean (red team): a run whose cordon is gone leaves its slot with a
// ring buffer full of its events and a filter that allows /var; the next run takes
// that slot and reads none of those events, and its filter is its own profile's
// alone: a read under /var is sent and alerted. A record of another holder that
// reaches the reader anyway is dropped and counted.
func TestSlotReuseIsClean(t *testing.T) {
	requireBPF(t)
	root := cleanRoot(t)
	wide := hostProfile()
	wide.Paths = append(wide.Paths, PathRule{Path: "/var", Access: contract.ReadOnly, Why: "test"})
	cg, err := linux.NewCgroup(fmt.Sprintf("monitor-test-stale-%d", os.Getpid()), linux.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Remove()
	// The earlier holder's reader stops at its first record, as a crashed cordon's
	// would: what follows stays in the ring buffer.
	stuck := make(chan struct{})
	var once sync.Once
	unstick := func() { once.Do(func() { close(stuck) }) }
	a, err := Start(context.Background(), Options{CgroupID: cg.ID, Profile: wide, onRecord: func(Record) { <-stuck }})
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
	n, ok := heldSlot(p, cg.ID)
	if !ok || filterLen(t, p, n) == 0 {
		t.Fatalf("the earlier run holds slot %d (%v) with an empty filter: the test proves nothing", n, ok)
	}
	if a.rd.AvailableBytes() == 0 {
		t.Fatal("the earlier run's ring buffer is empty: the test proves nothing")
	}
	// Its cordon gone: its run and its claim swept (sweep, for an owner that is dead).
	if _, err := a.pins.leave(context.Background(), cg.ID); err != nil {
		t.Fatal(err)
	}
	if err := p.claims.Delete(n); err != nil {
		t.Fatal(err)
	}

	b := newHarness(t, hostProfile(), Options{})
	if b.m.slot.n != n {
		t.Fatalf("the next run took slot %d, not the freed %d", b.m.slot.n, n)
	}
	if b.m.slot.drained == 0 || b.m.Stats().Foreign < b.m.slot.drained {
		t.Errorf("the next run drained %d records, counted %d foreign; want the earlier run's, counted", b.m.slot.drained, b.m.Stats().Foreign)
	}
	entries, _ := filterEntries(&b.m.chk.prof)
	if got := filterLen(t, p, n); got != len(entries) {
		t.Errorf("the reused filter has %d entries; the run's profile makes %d", got, len(entries))
	}
	const path = "/var/lib/dpkg/status"
	b.helper("open", "r:"+path)
	if _, ok := b.find(func(x Alert) bool { return x.Path == path && x.Category == CatReadOutside }); !ok {
		t.Errorf("the run on a reused slot saw no alert for %s: the earlier filter still applies", path)
	}
	_, records := b.got()
	for _, r := range records {
		if r.Cgroup == cg.ID || r.Ticket != b.m.slot.ticket {
			t.Fatalf("the run read a record of the earlier holder: %+v", r)
		}
	}
	// A record with another ticket reaching the reader is dropped, and counted.
	raw := make([]byte, headerLen)
	binary.NativeEndian.PutUint64(raw, b.cg.ID)
	binary.NativeEndian.PutUint16(raw[offSC:], uint16(SysExecve))
	binary.NativeEndian.PutUint64(raw[offTicket:], b.m.slot.ticket+1)
	binary.NativeEndian.PutUint64(raw[offRun:], b.cg.ID)
	before, foreign := len(records), b.m.Stats().Foreign
	b.m.handle(raw)
	if _, records := b.got(); len(records) != before || b.m.Stats().Foreign != foreign+1 {
		t.Errorf("a record with another run's ticket was handled (records %d -> %d, foreign %d -> %d)",
			before, len(records), foreign, b.m.Stats().Foreign)
	}
	// So is one with the run's ticket sent for another run's task (a program that read
	// the ticket from an entry the kernel had just handed to this run).
	binary.NativeEndian.PutUint64(raw[offTicket:], b.m.slot.ticket)
	binary.NativeEndian.PutUint64(raw[offRun:], b.cg.ID+1)
	b.m.handle(raw)
	if _, records := b.got(); len(records) != before || b.m.Stats().Foreign != foreign+2 {
		t.Errorf("a record with the run's ticket but another run's cgroup was handled (records %d -> %d, foreign %d -> %d)",
			before, len(records), foreign, b.m.Stats().Foreign)
	}
}

// TestClaimStorm: claims made at once never share a slot, whether they race on the
// claims map alone (BPF_NOEXIST, no lock) or come from cordon processes starting
// together.
func TestClaimStorm(t *testing.T) {
	requireBPF(t)
	root := cleanRoot(t)
	newHarness(t, hostProfile(), Options{}) // the set, loaded
	p := pinnedSet(t, root)
	const racers = 48
	slots := make([]*slot, racers)
	errs := make([]error, racers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range slots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			slots[i], errs[i] = p.claim(monitorClaim{OwnerPid: uint32(os.Getpid()), OwnerStart: owner.Self().Start, Cgroup: uint64(1000 + i)}, 4096)
		}()
	}
	close(start)
	wg.Wait()
	seen := map[uint32]int{}
	for i, s := range slots {
		if errs[i] != nil {
			t.Fatalf("claim %d: %v", i, errs[i])
		}
		if j, dup := seen[s.n]; dup {
			t.Errorf("claims %d and %d share slot %d", j, i, s.n)
		}
		seen[s.n] = i
	}
	for _, s := range slots {
		if err := p.drop(s); err != nil {
			t.Error(err)
		}
	}

	// Processes: each holds a run of its own cgroup.
	const procs = 6
	exe, _ := os.Executable()
	ids := make([]uint64, procs)
	for i := range ids {
		cg, err := linux.NewCgroup(fmt.Sprintf("monitor-test-storm-%d-%d", os.Getpid(), i), linux.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		defer cg.Remove()
		ids[i] = cg.ID
	}
	cmds := make([]*exec.Cmd, procs)
	for i := range cmds {
		cmds[i] = exec.Command(exe, strconv.FormatUint(ids[i], 10))
		cmds[i].Env = append(os.Environ(), helperEnv+"=hold")
		out, _ := cmds[i].StdoutPipe()
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
		defer cmds[i].Wait()
		defer cmds[i].Process.Kill()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
				t.Errorf("holder %d: %q", i, line)
			}
		}()
	}
	wg.Wait()
	held := map[uint32]uint64{}
	for _, id := range ids {
		n, ok := heldSlot(p, id)
		if !ok {
			t.Errorf("cgroup %d holds no slot", id)
			continue
		}
		if other, dup := held[n]; dup {
			t.Errorf("cgroups %d and %d share slot %d", other, id, n)
		}
		held[n] = id
	}
}

// TestDeadOwnersSlotIsReclaimed: the next run takes the slot of a cordon that is gone
// (its pid gone, or its pid now another process's: the start time differs), never
// that of a live one, even with no run registered.
func TestDeadOwnersSlotIsReclaimed(t *testing.T) {
	requireBPF(t)
	root := cleanRoot(t)
	h := newHarness(t, hostProfile(), Options{})
	p := pinnedSet(t, root)
	self := owner.Self()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	forged := map[string]monitorClaim{
		"live":   {OwnerPid: uint32(self.PID), OwnerStart: self.Start, Cgroup: 1},
		"reused": {OwnerPid: uint32(self.PID), OwnerStart: self.Start + 1, Cgroup: 2},
		"gone":   {OwnerPid: uint32(gone.Process.Pid), OwnerStart: self.Start, Cgroup: 3},
	}
	at := map[string]uint32{}
	n := h.m.slot.n
	for _, name := range []string{"live", "reused", "gone"} {
		n++
		if err := p.claims.Update(n, forged[name], ebpf.UpdateNoExist); err != nil {
			t.Fatal(err)
		}
		at[name] = n
	}
	t.Cleanup(func() { p.claims.Delete(at["live"]) })
	h2 := newHarness(t, hostProfile(), Options{})
	h3 := newHarness(t, hostProfile(), Options{})
	got := []uint32{h2.m.slot.n, h3.m.slot.n}
	if got[0] != at["reused"] || got[1] != at["gone"] {
		t.Errorf("the next runs took slots %v; want the dead owners' %d and %d", got, at["reused"], at["gone"])
	}
	var c monitorClaim
	if err := p.claims.Lookup(at["live"], &c); err != nil || c != forged["live"] {
		t.Errorf("the live owner's claim on slot %d: %+v, %v; want it kept", at["live"], c, err)
	}
	if _, ok := heldSlot(p, h.cg.ID); !ok {
		t.Error("the first run lost its slot")
	}
}

// TestSlotBound: with every slot held by a live cordon, a run is refused with an error
// that says so (monitor.mode decides the rest), never registered without a ring
// buffer; once slots are free, runs start again.
func TestSlotBound(t *testing.T) {
	requireBPF(t)
	root := cleanRoot(t)
	newHarness(t, hostProfile(), Options{})
	p := pinnedSet(t, root)
	forged := forgeClaims(t, p, maxSlots)
	cg, err := linux.NewCgroup(fmt.Sprintf("monitor-test-bound-%d", os.Getpid()), linux.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Remove()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := Start(ctx, Options{CgroupID: cg.ID, Profile: hostProfile()})
	if err == nil {
		m.Close()
		t.Fatal("a run started with every slot held")
	}
	if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "slots are held") {
		t.Errorf("Start with every slot held: %v; want an unavailable error saying so", err)
	}
	var r monitorRun
	if err := p.runs.Lookup(cg.ID, &r); !errors.Is(err, ebpf.ErrKeyNotExist) {
		t.Errorf("the refused run is registered: %v", err)
	}
	p.claims.Delete((*forged)[len(*forged)-1])
	*forged = (*forged)[:len(*forged)-1]
	m, err = Start(ctx, Options{CgroupID: cg.ID, Profile: hostProfile()})
	if err != nil {
		t.Fatalf("Start with a slot free: %v", err)
	}
	m.Close()
	<-m.Released()
}

// TestGCRemovesTheOldLayout: a set pinned by a build from before the slots (its runs
// map has 56-byte values) is never opened by this one; gc keeps it while a run is
// registered in it and removes it once none is, leaving the live set alone.
func TestGCRemovesTheOldLayout(t *testing.T) {
	requireBPF(t)
	root := cleanRoot(t)
	newHarness(t, hostProfile(), Options{})
	dir := filepath.Join(root, setPrefix+"0123456789abcdef")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	runs, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Hash, KeySize: 8, ValueSize: 56, MaxEntries: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer runs.Close()
	if err := runs.Pin(filepath.Join(dir, pinRuns)); err != nil {
		t.Fatal(err)
	}
	if err := runs.Update(uint64(1), make([]byte, 56), ebpf.UpdateAny); err != nil {
		t.Fatal(err)
	}
	if col, err := gc(context.Background(), root); err != nil || len(col.Sets) != 0 {
		t.Errorf("gc with a run in the old set: %+v, %v; want nothing removed", col, err)
	}
	runs.Delete(uint64(1))
	col, err := gc(context.Background(), root)
	if err != nil || len(col.Sets) != 1 || col.Sets[0] != dir {
		t.Errorf("gc with the old set unused: %+v, %v; want %s removed", col, err, dir)
	}
	if _, err := os.Lstat(filepath.Join(root, setName())); err != nil {
		t.Errorf("gc removed the live set: %v", err)
	}
}

// TestSlotsPastKeptAreRemoved: a slot numbered from keptSlots on (made because more runs
// than that were monitored at once) loses its ring buffer and filter when its run
// releases it, and its claim with them; a kept slot keeps both for the next run.
func TestSlotsPastKeptAreRemoved(t *testing.T) {
	requireBPF(t)
	root := cleanRoot(t)
	newHarness(t, hostProfile(), Options{})
	p := pinnedSet(t, root)
	forged := forgeClaims(t, p, keptSlots)
	cg, err := linux.NewCgroup(fmt.Sprintf("monitor-test-kept-%d", os.Getpid()), linux.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Remove()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := Start(ctx, Options{CgroupID: cg.ID, Profile: hostProfile()})
	if err != nil {
		t.Fatal(err)
	}
	n := m.slot.n
	if n < keptSlots {
		m.Close()
		t.Fatalf("the run took slot %d with slots 0-%d claimed", n, keptSlots-1)
	}
	var id ebpf.MapID
	if err := p.rings.Lookup(n, &id); err != nil {
		t.Fatalf("slot %d has no ring buffer while its run is registered: %v", n, err)
	}
	m.Close()
	<-m.Released()
	if err := m.ReleaseErr(); err != nil {
		t.Fatal(err)
	}
	for name, outer := range map[string]*ebpf.Map{"ring buffer": p.rings, "filter": p.filters} {
		if err := outer.Lookup(n, &id); !errors.Is(err, ebpf.ErrKeyNotExist) {
			t.Errorf("slot %d past the kept ones still has its %s after release: %v", n, name, err)
		}
	}
	var c monitorClaim
	if err := p.claims.Lookup(n, &c); !errors.Is(err, ebpf.ErrKeyNotExist) {
		t.Errorf("slot %d is still claimed after release: %v %+v", n, err, c)
	}

	// A kept slot keeps its maps: free one and run again.
	k := (*forged)[0]
	p.claims.Delete(k)
	*forged = (*forged)[1:]
	m, err = Start(ctx, Options{CgroupID: cg.ID, Profile: hostProfile()})
	if err != nil {
		t.Fatal(err)
	}
	if m.slot.n != k {
		t.Errorf("the run took slot %d; want the lowest free, %d", m.slot.n, k)
	}
	m.Close()
	<-m.Released()
	if err := p.rings.Lookup(k, &id); err != nil {
		t.Errorf("kept slot %d lost its ring buffer at release: %v", k, err)
	}
}

// forgeClaims claims, for this live process, every slot below n that is free, and
// gives them up when the test ends (or when the caller deletes them from the list).
func forgeClaims(t *testing.T, p *pinned, n uint32) *[]uint32 {
	t.Helper()
	self := owner.Self()
	forged := new([]uint32)
	t.Cleanup(func() {
		for _, k := range *forged {
			p.claims.Delete(k)
		}
	})
	for k := uint32(0); k < n; k++ {
		err := p.claims.Update(k, monitorClaim{OwnerPid: uint32(self.PID), OwnerStart: self.Start, Cgroup: 7}, ebpf.UpdateNoExist)
		if err == nil {
			*forged = append(*forged, k)
		} else if !errors.Is(err, ebpf.ErrKeyExist) {
			t.Fatalf("claiming slot %d: %v", k, err)
		}
	}
	return forged
}
