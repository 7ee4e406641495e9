package quota

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/server/config"
)

const gib = 1 << 30

// clock is a settable clock for the ledger.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func withClock(c *clock) option { return func(l *Ledger) { l.now = c.now } }

func withAuditBound(n int) option {
	return func(l *Ledger) {
		for _, a := range l.accounts {
			a.audit.maxEntries = n
		}
	}
}

// testQuotas: 5 sessions, 10GiB, 100 pids, 2.5 CPUs, 2h, 1MiB of audit.
func testQuotas() config.Quotas {
	return config.Quotas{Sessions: 5, Memory: 10 * gib, Pids: 100, CPU: 2.5, Wall: 2 * time.Hour, Audit: 1 << 20}
}

// newLedger is a ledger for one tenant "a" with quotas q, and its audit root.
func newLedger(t *testing.T, q config.Quotas, opts ...option) (*Ledger, string) {
	t.Helper()
	root := t.TempDir()
	cfg := &config.Config{Tenants: []config.Tenant{{Name: "a", Root: root, Quotas: q}}}
	audit := cfg.Tenants[0].AuditRoot()
	if err := os.Mkdir(audit, 0o700); err != nil {
		t.Fatal(err)
	}
	return New(cfg, opts...), audit
}

func exceeded(t *testing.T, err error, quota string) *Exceeded {
	t.Helper()
	var e *Exceeded
	if !errors.As(err, &e) || !errors.Is(err, ErrExceeded) || e.Quota != quota {
		t.Fatalf("got %v; want quota %s exceeded", err, quota)
	}
	if e.RetryAfter < time.Second || e.RetryAfter > time.Minute || e.RetryAfter%time.Second != 0 {
		t.Errorf("Retry-After %v: want whole seconds in [1s, 1m]", e.RetryAfter)
	}
	return e
}

// TestReserveNeverExceeds: many goroutines reserve random requests and release them;
// what is held at any moment never passes a quota, refusals name a quota, and all is
// given back at the end. What the test counts as held is added after Reserve returns
// and taken away before release: it is never more than the ledger holds, so if it
// passes a quota the ledger granted past it.
func TestReserveNeverExceeds(t *testing.T) {
	q := testQuotas()
	l, _ := newLedger(t, q)
	// A session held throughout leaves 2GiB: the asks of 3 and 4GiB are always refused
	// and those of 1 and 2GiB granted when nothing else holds, so both outcomes happen
	// however the goroutines are scheduled (a busy machine may run them one by one).
	base := Request{Memory: 8 * gib, PIDs: 1, CPU: 0.1}
	releaseBase, err := l.Reserve("a", base)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu                   sync.Mutex
		sessions             = 1
		memory, pids, cpuMil = base.Memory, base.PIDs, milli(base.CPU)
		granted, refused     atomic.Int64
		wg                   sync.WaitGroup
	)
	for g := range 48 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range 300 {
				r := Request{Memory: (1 + rng.Int64N(4)) * gib, PIDs: 1 + rng.Int64N(40), CPU: float64(1+rng.IntN(15)) / 10}
				release, err := l.Reserve("a", r)
				if err != nil {
					var e *Exceeded
					if !errors.As(err, &e) {
						t.Errorf("Reserve(%+v): %v; want *Exceeded", r, err)
						return
					}
					refused.Add(1)
					continue
				}
				granted.Add(1)
				mu.Lock()
				sessions, memory, pids, cpuMil = sessions+1, memory+r.Memory, pids+r.PIDs, cpuMil+milli(r.CPU)
				if sessions > q.Sessions || memory > q.Memory || pids > q.Pids || cpuMil > 2500 {
					t.Errorf("held %d sessions, %d bytes, %d pids, %d mCPU: past the quotas %+v", sessions, memory, pids, cpuMil, q)
				}
				mu.Unlock()
				for range rng.IntN(50) {
					_ = rng.Int() // hold it a little
				}
				mu.Lock()
				sessions, memory, pids, cpuMil = sessions-1, memory-r.Memory, pids-r.PIDs, cpuMil-milli(r.CPU)
				mu.Unlock()
				release()
				if rng.IntN(4) == 0 {
					release()
				}
			}
		}()
	}
	wg.Wait()
	releaseBase()
	if granted.Load() == 0 || refused.Load() == 0 {
		t.Errorf("granted %d, refused %d: want both", granted.Load(), refused.Load())
	}
	if n, r := l.Used("a"); n != 0 || r != (Request{}) {
		t.Errorf("after every release: holds %d sessions, %+v", n, r)
	}
}

// TestReleaseReturnsCapacity: each quota refuses past it, names itself, and a release
// makes room again.
func TestReleaseReturnsCapacity(t *testing.T) {
	small := Request{Memory: gib, PIDs: 1, CPU: 0.1}
	for _, tc := range []struct {
		quota       string
		first, next Request
		n           int
	}{
		{Sessions, small, small, 5},
		{Memory, Request{Memory: 6 * gib, PIDs: 1, CPU: 0.1}, Request{Memory: 5 * gib, PIDs: 1, CPU: 0.1}, 1},
		{Pids, Request{Memory: gib, PIDs: 60, CPU: 0.1}, Request{Memory: gib, PIDs: 41, CPU: 0.1}, 1},
		{CPU, Request{Memory: gib, PIDs: 1, CPU: 2}, Request{Memory: gib, PIDs: 1, CPU: 0.501}, 1},
	} {
		t.Run(tc.quota, func(t *testing.T) {
			l, _ := newLedger(t, testQuotas())
			var releases []func()
			for range tc.n {
				rel, err := l.Reserve("a", tc.first)
				if err != nil {
					t.Fatal(err)
				}
				releases = append(releases, rel)
			}
			_, err := l.Reserve("a", tc.next)
			exceeded(t, err, tc.quota)
			releases[0]()
			rel, err := l.Reserve("a", tc.next)
			if err != nil {
				t.Fatalf("after a release: %v", err)
			}
			rel()
		})
	}
}

// TestReleaseIdempotent: a second release gives back nothing more.
func TestReleaseIdempotent(t *testing.T) {
	l, _ := newLedger(t, testQuotas())
	r := Request{Memory: gib, PIDs: 10, CPU: 0.5}
	relA, _ := l.Reserve("a", r)
	relB, err := l.Reserve("a", r)
	if err != nil {
		t.Fatal(err)
	}
	relA()
	relA()
	if n, got := l.Used("a"); n != 1 || got != r {
		t.Errorf("after releasing one twice: %d sessions, %+v; want 1, %+v", n, got, r)
	}
	relB()
	if n, _ := l.Used("a"); n != 0 {
		t.Errorf("after both: %d sessions", n)
	}
}

// TestRetryAfter: the first wall deadline of the tenant's sessions, in whole seconds
// rounded up, within [1s, 1m].
func TestRetryAfter(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	q := testQuotas()
	q.Sessions, q.Wall = 1, 10*time.Second
	l, _ := newLedger(t, q, withClock(c))
	r := Request{Memory: gib, PIDs: 1, CPU: 0.1}
	if _, err := l.Reserve("a", r); err != nil {
		t.Fatal(err)
	}
	c.add(7500 * time.Millisecond)
	_, err := l.Reserve("a", r)
	if e := exceeded(t, err, Sessions); e.RetryAfter != 3*time.Second {
		t.Errorf("2.5s before the deadline: Retry-After %v; want 3s", e.RetryAfter)
	}
	c.add(time.Hour)
	_, err = l.Reserve("a", r)
	if e := exceeded(t, err, Sessions); e.RetryAfter != time.Second {
		t.Errorf("past the deadline: Retry-After %v; want 1s", e.RetryAfter)
	}

	q.Wall = 8 * time.Hour
	l, _ = newLedger(t, q, withClock(c))
	l.Reserve("a", r)
	_, err = l.Reserve("a", r)
	if e := exceeded(t, err, Sessions); e.RetryAfter != time.Minute {
		t.Errorf("8h before the deadline: Retry-After %v; want 1m", e.RetryAfter)
	}
}

// TestTooLarge: a request no wait could satisfy, or without a limit, is invalid, not
// a 429.
func TestTooLarge(t *testing.T) {
	l, _ := newLedger(t, testQuotas())
	for _, r := range []Request{
		{Memory: 11 * gib, PIDs: 1, CPU: 1},
		{Memory: gib, PIDs: 101, CPU: 1},
		{Memory: gib, PIDs: 1, CPU: 3},
		{Memory: 0, PIDs: 1, CPU: 1},
		{Memory: gib, PIDs: 1, CPU: 0},
	} {
		_, err := l.Reserve("a", r)
		if !errors.Is(err, ErrTooLarge) || !errors.Is(err, errdefs.ErrInvalid) || errors.Is(err, ErrExceeded) {
			t.Errorf("Reserve(%+v): %v; want ErrTooLarge, invalid", r, err)
		}
	}
	if _, err := l.Reserve("b", Request{Memory: gib, PIDs: 1, CPU: 1}); !errors.Is(err, ErrUnknownTenant) {
		t.Errorf("unknown tenant: %v", err)
	}
	if n, _ := l.Used("a"); n != 0 {
		t.Errorf("refusals charged %d sessions", n)
	}
}

// TestAdopt: a live session found after a restart is charged even past the quota, and
// new sessions are refused until it ends.
func TestAdopt(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	l, _ := newLedger(t, testQuotas(), withClock(c))
	rel, err := l.Adopt("a", Request{Memory: 12 * gib, PIDs: 5, CPU: 1}, c.now().Add(-2*time.Hour+20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Reserve("a", Request{Memory: gib, PIDs: 1, CPU: 0.1})
	if e := exceeded(t, err, Memory); e.RetryAfter != 20*time.Second {
		t.Errorf("Retry-After %v; want 20s (the adopted session's wall deadline)", e.RetryAfter)
	}
	rel()
	if rel2, err := l.Reserve("a", Request{Memory: gib, PIDs: 1, CPU: 0.1}); err != nil {
		t.Errorf("after the adopted session ended: %v", err)
	} else {
		rel2()
	}
	if _, err := l.Adopt("gone", Request{}, c.now()); !errors.Is(err, ErrUnknownTenant) {
		t.Errorf("adopting for an unknown tenant: %v", err)
	}
}

func TestWall(t *testing.T) {
	l, _ := newLedger(t, testQuotas())
	if got := l.Wall("a"); got != 2*time.Hour {
		t.Errorf("Wall: %v", got)
	}
	if got := l.Wall("nobody"); got <= 0 {
		t.Errorf("Wall of an unknown tenant: %v; want positive", got)
	}
}

func writeFile(t *testing.T, p string, n int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, make([]byte, n), 0o600); err != nil {
		t.Fatal(err)
	}
}
