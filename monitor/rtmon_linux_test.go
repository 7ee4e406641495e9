package monitor

import (
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/cilium/ebpf"
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
	w := a.command(append(os.Environ(), helperEnv+"=rate"), exe, "1000000000", "0")
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Process.Kill(); w.Wait() })
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
	for time.Now().Before(deadline) && stolen() == 0 {
		for i := 0; i < 2000; i++ {
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
