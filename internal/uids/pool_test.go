package uids

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/cordonhq/cordon/internal/owner"
	"github.com/cordonhq/cordon/internal/paths"
)

// testPool is a pool of count uids in a directory of its own, whose uids run no process.
func testPool(t *testing.T, count int) *Pool {
	t.Helper()
	return &Pool{Dir: filepath.Join(t.TempDir(), "uids"), Range: Range{Base: 2000000000, Count: count}, busy: func(int) bool { return false }}
}

// deadOwner is a process that has exited and been reaped.
func deadOwner(t *testing.T) owner.Process {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	me := owner.Self()
	return owner.Process{PID: cmd.Process.Pid, Start: me.Start, PIDNS: me.PIDNS}
}

// liveOwner is a process that runs until the test ends.
func liveOwner(t *testing.T) owner.Process {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	me := owner.Self()
	p := owner.Process{PID: cmd.Process.Pid, PIDNS: me.PIDNS}
	for p.Start == 0 {
		p.Start = startOf(t, p.PID)
	}
	return p
}

func startOf(t *testing.T, pid int) uint64 {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	n, _ := strconv.ParseUint(f[19], 10, 64)
	return n
}

func TestConcurrentAcquireGivesDistinctUIDsThenExhausts(t *testing.T) {
	p := testPool(t, 64)
	var mu sync.Mutex
	got := map[int]bool{}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := p.Acquire("run" + strconv.Itoa(i))
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if got[l.UID()] {
				errs <- fmt.Errorf("uid %d leased twice", l.UID())
			}
			if !p.Range.Contains(l.UID()) {
				errs <- fmt.Errorf("uid %d is outside %s", l.UID(), p.Range)
			}
			got[l.UID()] = true
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(got) != 64 {
		t.Fatalf("%d distinct uids leased; want 64", len(got))
	}
	_, err := p.Acquire("one-too-many")
	if !errors.Is(err, ErrExhausted) {
		t.Fatalf("65th lease of a 64-uid range: err = %v; want ErrExhausted", err)
	}
	if !strings.Contains(err.Error(), RangeEnv) {
		t.Errorf("the exhaustion error %q does not say how to widen the range", err)
	}
}

// TestHelperLeaser is not a test: run by TestAcquireAcrossProcesses in a child process,
// it leases UIDS_LEASES uids from the pool in UIDS_DIR, prints each, and holds them
// until its stdin closes.
func TestHelperLeaser(t *testing.T) {
	dir := os.Getenv("UIDS_DIR")
	if dir == "" {
		return // not a test: run by TestAcquireAcrossProcesses
	}
	n, _ := strconv.Atoi(os.Getenv("UIDS_LEASES"))
	count, _ := strconv.Atoi(os.Getenv("UIDS_COUNT"))
	p := &Pool{Dir: dir, Range: Range{Base: 2000000000, Count: count}, busy: func(int) bool { return false }}
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := p.Acquire("helper")
			if err != nil {
				fmt.Println("error", err)
				return
			}
			fmt.Println("uid", l.UID())
		}()
	}
	wg.Wait()
	fmt.Println("done")
	io.Copy(io.Discard, os.Stdin)
}

func TestAcquireAcrossProcesses(t *testing.T) {
	const procs, each = 4, 16
	p := testPool(t, procs*each)
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	got := map[int]int{}
	var stdins []io.Closer
	var cmds []*exec.Cmd
	outs := make([]*bufio.Scanner, procs)
	for i := range procs {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperLeaser$", "-test.count=1")
		cmd.Env = append(os.Environ(), "UIDS_DIR="+p.Dir, "UIDS_LEASES="+strconv.Itoa(each), "UIDS_COUNT="+strconv.Itoa(p.Range.Count))
		in, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		stdins, cmds, outs[i] = append(stdins, in), append(cmds, cmd), bufio.NewScanner(out)
	}
	t.Cleanup(func() {
		for _, in := range stdins {
			in.Close()
		}
		for _, c := range cmds {
			c.Process.Kill()
			c.Wait()
		}
	})
	for i, sc := range outs {
		for sc.Scan() {
			line := sc.Text()
			if line == "done" {
				break
			}
			if rest, ok := strings.CutPrefix(line, "uid "); ok {
				uid, _ := strconv.Atoi(rest)
				if prev, dup := got[uid]; dup {
					t.Errorf("uid %d leased by process %d and process %d", uid, prev, i)
				}
				got[uid] = i
			} else if strings.HasPrefix(line, "error") {
				t.Errorf("process %d: %s", i, line)
			}
		}
	}
	if len(got) != procs*each {
		t.Fatalf("%d distinct uids leased by %d processes; want %d", len(got), procs, procs*each)
	}
	// The leasers live: none of their uids is taken.
	if _, err := p.Acquire("while-they-live"); !errors.Is(err, ErrExhausted) {
		t.Fatalf("a lease while every owner lives: err = %v; want ErrExhausted", err)
	}
	// Killed: their leases are taken back by the allocation that finds the range
	// full, all at once.
	for _, c := range cmds {
		c.Process.Kill()
		c.Wait()
	}
	l, err := p.Acquire("after-they-died")
	if err != nil {
		t.Fatalf("a lease once every owner died: %v", err)
	}
	left, _ := p.Leases()
	if len(left) != 1 || left[0].UID != l.UID() || left[0].Owner != owner.Self() {
		t.Fatalf("leases left: %+v; want only this process's uid %d", left, l.UID())
	}
}

func TestDeadOwnersLeaseTakenBackLiveOwnersNever(t *testing.T) {
	p := testPool(t, 1)
	uid := p.Range.Base
	live := liveOwner(t)
	if _, err := p.acquire(live, "live"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Acquire("second"); !errors.Is(err, ErrExhausted) {
		t.Fatalf("the only uid's owner lives: err = %v; want ErrExhausted", err)
	}
	if freed, err := p.Reclaim(); err != nil || len(freed) != 0 {
		t.Fatalf("Reclaim freed %v (%v) while its owner lives", freed, err)
	}

	p = testPool(t, 1)
	if _, err := p.acquire(deadOwner(t), "dead"); err != nil {
		t.Fatal(err)
	}
	l, err := p.Acquire("next")
	if err != nil || l.UID() != uid {
		t.Fatalf("a dead owner's uid: lease %v, err %v; want uid %d", l, err, uid)
	}
	rec, err := p.read(uid)
	if err != nil || rec.Owner != owner.Self() || rec.Run != "next" {
		t.Fatalf("the lease now says %+v (%v); want this process, run next", rec, err)
	}

	p = testPool(t, 1)
	if _, err := p.acquire(deadOwner(t), "dead"); err != nil {
		t.Fatal(err)
	}
	if freed, err := p.Reclaim(); err != nil || len(freed) != 1 || freed[0] != uid {
		t.Fatalf("Reclaim freed %v (%v); want [%d]", freed, err, uid)
	}
	if left, _ := p.Leases(); len(left) != 0 {
		t.Fatalf("leases left after Reclaim: %+v", left)
	}
	// Reclaim takes back leases of any range (another cordon's $CORDON_UID_RANGE);
	// an allocation leases only from its own.
	other := &Pool{Dir: p.Dir, Range: Range{Base: p.Range.Base + 10, Count: 1}, busy: p.busy}
	if _, err := other.acquire(deadOwner(t), "dead"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.acquire(deadOwner(t), "dead"); err != nil {
		t.Fatal(err)
	}
	if l, err := p.Acquire("mine"); err != nil || l.UID() != uid {
		t.Fatalf("lease %v, %v; want uid %d of the pool's own range", l, err, uid)
	}
	if freed, err := p.Reclaim(); err != nil || len(freed) != 0 {
		t.Fatalf("Reclaim freed %v (%v); the allocation took back every dead lease already", freed, err)
	}
}

func TestDeadOwnersUIDStillRunningIsNotTaken(t *testing.T) {
	p := testPool(t, 1)
	p.busy = func(int) bool { return true }
	if _, err := p.acquire(deadOwner(t), "dead"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Acquire("next"); !errors.Is(err, ErrExhausted) {
		t.Fatalf("a dead owner's uid that still runs a process: err = %v; want ErrExhausted", err)
	}
	if freed, _ := p.Reclaim(); len(freed) != 0 {
		t.Fatalf("Reclaim freed %v while the uid runs a process", freed)
	}
}

func TestReleaseLeavesAnotherOwnersLease(t *testing.T) {
	p := testPool(t, 1)
	l, err := p.Acquire("first")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if left, _ := p.Leases(); len(left) != 0 {
		t.Fatalf("leases left after Release: %+v", left)
	}
	next, err := p.Acquire("second")
	if err != nil {
		t.Fatal(err)
	}
	// A stale handle of the first lease (released already, or taken back) must not
	// remove the second.
	stale := &Lease{pool: p, rec: l.rec}
	if err := stale.Release(); err != nil {
		t.Fatal(err)
	}
	if left, _ := p.Leases(); len(left) != 1 || left[0].Run != "second" {
		t.Fatalf("leases after an old handle's Release: %+v; want %d's lease for run second", left, next.UID())
	}
}

func TestHalfWrittenLeaseRemovedAndForeignFilesLeftAlone(t *testing.T) {
	p := testPool(t, 2)
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	half := filepath.Join(p.Dir, newPrefix+"1-x")
	garbage := p.path(p.Range.Base)
	for _, f := range []string{half, garbage} {
		if err := os.WriteFile(f, []byte("{"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	l, err := p.Acquire("x")
	if err != nil || l.UID() != p.Range.Base+1 {
		t.Fatalf("lease %v, %v; want uid %d (the other holds an unreadable lease)", l, err, p.Range.Base+1)
	}
	if _, err := os.Lstat(half); err == nil {
		t.Errorf("%s, a lease its writer never linked, is left", half)
	}
	if _, err := p.Acquire("y"); !errors.Is(err, ErrExhausted) {
		t.Fatalf("an unreadable lease was taken: err = %v", err)
	}
}

func TestLeaseDirectoryOthersCanWriteRefused(t *testing.T) {
	p := testPool(t, 1)
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p.Dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Acquire("x"); !errors.Is(err, paths.ErrUnsafe) || !strings.Contains(err.Error(), "writable by group or others") {
		t.Fatalf("a world-writable lease directory: err = %v", err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(p.Dir, link); err != nil {
		t.Fatal(err)
	}
	os.Chmod(p.Dir, 0o700)
	p.Dir = link
	if _, err := p.Acquire("x"); err == nil {
		t.Fatal("a lease directory that is a symbolic link was used")
	}
}

func TestUIDBusy(t *testing.T) {
	if !uidBusy(os.Geteuid()) {
		t.Errorf("uidBusy(%d) = false; this test runs as it", os.Geteuid())
	}
	// The last uids of the range no process runs as (one scan), so that the
	// answer for a free uid is checked whatever else runs on the host.
	used, err := idsInUse(DefaultRange)
	if err != nil {
		t.Fatal(err)
	}
	free := DefaultRange.Base + DefaultRange.Count - 1
	for used[free] {
		free--
	}
	if uidBusy(free) {
		t.Errorf("uidBusy(%d) = true; no process ran as it a moment ago", free)
	}
}

func TestParseRange(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Range
		err  string
	}{
		{"2080374784:65536", DefaultRange, ""},
		{"70000:10", Range{70000, 10}, ""},
		{"0:10", Range{}, "65536"},
		{"1000:10", Range{}, "65536"},
		{"65530:10", Range{}, "65536"},
		{"4294967290:10", Range{}, "2147483647"},
		{"2147483640:10", Range{}, "2147483647"},
		{"99999999999999999999:1", Range{}, "2147483647"},
		{"-5:10", Range{}, "65536"},
		{"100000:0", Range{}, "count"},
		{"100000:2000000", Range{}, "count"},
		{"100000", Range{}, "BASE:COUNT"},
		{"x:1", Range{}, "BASE:COUNT"},
	} {
		got, err := ParseRange(tc.in)
		if tc.err == "" && (err != nil || got != tc.want) || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("ParseRange(%q) = %v, %v; want %v, error containing %q", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestRangeFromEnv(t *testing.T) {
	t.Setenv(LegacyEnv, "")
	t.Setenv(RangeEnv, "")
	if r, err := RangeFromEnv(); err != nil || r != DefaultRange {
		t.Errorf("no variable: %v, %v; want the default range", r, err)
	}
	t.Setenv(RangeEnv, "70000:5")
	if r, err := RangeFromEnv(); err != nil || r != (Range{70000, 5}) {
		t.Errorf("%s=70000:5: %v, %v", RangeEnv, r, err)
	}
	t.Setenv(LegacyEnv, "64999")
	if _, err := RangeFromEnv(); err == nil || !strings.Contains(err.Error(), RangeEnv) {
		t.Errorf("%s set: err = %v; want a refusal naming %s", LegacyEnv, err, RangeEnv)
	}
}

// BenchmarkLease is what a run pays for its uid: the lease, with 16 other runs'
// leases live, and its release.
func BenchmarkLease(b *testing.B) {
	p := &Pool{Dir: filepath.Join(b.TempDir(), "uids"), Range: DefaultRange}
	for range 16 {
		if _, err := p.Acquire("other"); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		l, err := p.Acquire("run")
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(); err != nil {
			b.Fatal(err)
		}
	}
}
