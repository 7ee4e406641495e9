// Package quota holds each tenant of `cordon serve` to its quotas (config.Quotas):
// concurrent sessions, the memory, pids and CPU its sessions' limits add up to, the
// wall time of a session and the bytes of its audit root.
//
// A session is charged the limits it runs with ([Fit] says which), never what it
// happens to use: the kernel holds it to those limits, so the sum of what a tenant's
// sessions can take is bounded by the quota whatever they do. Past a quota a
// reservation is refused at once with an [*Exceeded] (HTTP 429 and Retry-After);
// nothing waits in a queue.
//
// The [Ledger] is in memory. After a restart the server rebuilds it from the
// sessions still alive in each tenant's run root ([Ledger.Adopt]).
package quota

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/server/config"
)

// The quotas an [Exceeded] names (api.Error.Quota).
const (
	Sessions = "sessions"
	Memory   = "memory"
	Pids     = "pids"
	CPU      = "cpu"
	Audit    = "audit"
	Disk     = "disk"
)

// Errors returned by the Ledger and Fit.
var (
	// ErrExceeded: a quota is used up for now; an [*Exceeded] says which and when to
	// retry.
	ErrExceeded = errors.New("quota exceeded")
	// ErrTooLarge: a session asks for more than the tenant's whole quota (or for no
	// limit at all): no retry can succeed. In the category errdefs.ErrInvalid.
	ErrTooLarge = errors.New("more than the tenant's quota")
	// ErrUnknownTenant: the config names no such tenant.
	ErrUnknownTenant = errors.New("unknown tenant")
)

// Retry-After bounds: a refused client is told to come back within this range.
const (
	minRetry = time.Second
	maxRetry = time.Minute
)

// Exceeded is a reservation refused because a quota is used up. It matches
// [ErrExceeded] with errors.Is.
type Exceeded struct {
	Quota      string        // Sessions, Memory, Pids, CPU, Audit or Disk
	RetryAfter time.Duration // when to try again: in [1s, 1m]
	Detail     string        // for the tenant: what is in use, of how much, and what was asked
}

func (e *Exceeded) Error() string {
	return fmt.Sprintf("quota %s exceeded: %s", e.Quota, e.Detail)
}

// Is reports whether target is [ErrExceeded].
func (e *Exceeded) Is(target error) bool { return target == ErrExceeded }

// Request is what one session is charged: the limits it runs with ([Fit]).
type Request struct {
	Memory int64   // bytes
	PIDs   int64   // processes and threads
	CPU    float64 // CPUs
}

// Ledger is what each tenant holds now, against its quotas. One per server; safe for
// concurrent use by multiple goroutines.
type Ledger struct {
	now func() time.Time

	// mu guards the fields of every account (not the audit meters: a walk of an audit
	// root never holds mu).
	mu       sync.Mutex
	accounts map[string]*account // by tenant name; fixed after New
}

// account is one tenant's quotas and holdings.
type account struct {
	q     config.Quotas
	cpu   int64 // q.CPU in thousandths
	audit *meter
	root  string // the tenant's root: its disk when q.Disk is set

	// Guarded by Ledger.mu.
	used usage
	held map[*hold]struct{}
}

// usage is what a tenant's sessions hold; CPU in thousandths, so sums are exact.
type usage struct {
	sessions          int
	memory, pids, cpu int64
}

// hold is one session's charge.
type hold struct {
	charge   usage
	deadline time.Time // when its wall time ends
}

// option is a knob only tests turn.
type option func(*Ledger)

// New is a ledger for cfg's tenants, each holding nothing.
func New(cfg *config.Config, opts ...option) *Ledger {
	l := &Ledger{now: time.Now, accounts: map[string]*account{}}
	for _, t := range cfg.Tenants {
		l.accounts[t.Name] = &account{
			q:     t.Quotas,
			cpu:   int64(math.Round(t.Quotas.CPU * 1000)),
			audit: &meter{root: t.AuditRoot(), limit: t.Quotas.Audit, maxEntries: maxAuditEntries},
			root:  t.Root,
			held:  map[*hold]struct{}{},
		}
	}
	for _, o := range opts {
		o(l)
	}
	return l
}

// Wall is the longest a session of tenant may live; the sessions code stops it then.
// Never zero: a tenant the config does not name (it holds no session) gets the
// default.
func (l *Ledger) Wall(tenant string) time.Duration {
	if a := l.accounts[tenant]; a != nil {
		return a.q.Wall
	}
	return config.DefaultQuotas().Wall
}

// Reserve charges one new session of tenant with r, or refuses: an [*Exceeded] when
// a quota is used up for now (the tenant's sessions, memory, pids, CPU, or its audit
// root's bytes); [ErrTooLarge] when r is more than the whole quota or leaves a limit
// unset; [ErrUnknownTenant]. It never waits for capacity. release gives the charge
// back; it may be called any number of times.
func (l *Ledger) Reserve(tenant string, r Request) (release func(), err error) {
	a := l.accounts[tenant]
	if a == nil {
		return nil, fmt.Errorf("%w %q", ErrUnknownTenant, tenant)
	}
	c, err := a.charge(r)
	if err != nil {
		return nil, err
	}
	if err := l.room(a); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := a.refuse(c, l.now()); e != nil {
		return nil, e
	}
	return l.add(a, c, l.now()), nil
}

// Room reports whether tenant may have one more session by what is not charged per
// session: its audit root's bytes and its disk's free space (an [*Exceeded] when
// not). A session claimed from a warm pool, charged since it was started, is a new
// session of the tenant all the same: its claim asks Room.
func (l *Ledger) Room(tenant string) error {
	a := l.accounts[tenant]
	if a == nil {
		return fmt.Errorf("%w %q", ErrUnknownTenant, tenant)
	}
	return l.room(a)
}

// room is Room's checks. The audit root is measured outside mu (a bounded walk,
// cached): its bytes grow with what sessions log, not with what they are charged.
func (l *Ledger) room(a *account) error {
	if e := a.audit.check(l.now); e != nil {
		return e
	}
	return a.diskCheck()
}

// Remeasure drops tenant's last audit-root figure (after a prune): its next start
// measures again instead of waiting for the figure to age.
func (l *Ledger) Remeasure(tenant string) {
	if a := l.accounts[tenant]; a != nil {
		a.audit.forget()
	}
}

// Adopt charges tenant for a session that is already running, found after a restart;
// started is when it started (its wall time counts from then). It is charged even
// past a quota: it exists, and leaving it out would let new sessions overcommit the
// tenant. Call it for every live session before serving requests.
func (l *Ledger) Adopt(tenant string, r Request, started time.Time) (release func(), err error) {
	a := l.accounts[tenant]
	if a == nil {
		return nil, fmt.Errorf("%w %q", ErrUnknownTenant, tenant)
	}
	c := usage{sessions: 1, memory: max(r.Memory, 0), pids: max(r.PIDs, 0), cpu: milli(max(r.CPU, 0))}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.add(a, c, started), nil
}

// add records c on a and returns its idempotent release. l.mu is held.
func (l *Ledger) add(a *account, c usage, started time.Time) func() {
	h := &hold{charge: c, deadline: started.Add(a.q.Wall)}
	a.used = a.used.plus(c, 1)
	a.held[h] = struct{}{}
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			a.used = a.used.plus(h.charge, -1)
			delete(a.held, h)
		})
	}
}

// Used is what tenant holds now: sessions, memory bytes, pids and CPUs.
func (l *Ledger) Used(tenant string) (sessions int, r Request) {
	a := l.accounts[tenant]
	if a == nil {
		return 0, Request{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return a.used.sessions, Request{Memory: a.used.memory, PIDs: a.used.pids, CPU: float64(a.used.cpu) / 1000}
}

func (u usage) plus(c usage, sign int) usage {
	s := int64(sign)
	return usage{sessions: u.sessions + sign, memory: u.memory + s*c.memory, pids: u.pids + s*c.pids, cpu: u.cpu + s*c.cpu}
}

// milli is CPUs in thousandths, rounded up: a session is never charged less than its
// limit.
func milli(cpu float64) int64 { return int64(math.Ceil(cpu*1000 - 1e-9)) }

// charge is r as a usage, or ErrTooLarge when r could never fit a's quotas.
func (a *account) charge(r Request) (usage, error) {
	q := a.q
	var errs []error
	for _, f := range []struct {
		name      string
		ask, have float64
	}{
		{Memory, float64(r.Memory), float64(q.Memory)},
		{Pids, float64(r.PIDs), float64(q.Pids)},
		{CPU, r.CPU, q.CPU},
	} {
		switch {
		case !(f.ask > 0):
			errs = append(errs, fmt.Errorf("%w: a session must have a %s limit", ErrTooLarge, f.name))
		case f.ask > f.have:
			errs = append(errs, fmt.Errorf("%w: %s %v asked, the whole quota is %v", ErrTooLarge, f.name, f.ask, f.have))
		}
	}
	if len(errs) > 0 {
		return usage{}, errdefs.Invalidf("%w", errors.Join(errs...))
	}
	return usage{sessions: 1, memory: r.Memory, pids: r.PIDs, cpu: milli(r.CPU)}, nil
}

// refuse is the first quota c would take a past, or nil. l.mu is held.
func (a *account) refuse(c usage, now time.Time) *Exceeded {
	u, q := a.used, a.q
	for _, f := range []struct {
		name            string
		used, ask, have int64
		unit            string
	}{
		{Sessions, int64(u.sessions), 1, int64(q.Sessions), " sessions"},
		{Memory, u.memory, c.memory, q.Memory, " bytes"},
		{Pids, u.pids, c.pids, q.Pids, " pids"},
		{CPU, u.cpu, c.cpu, a.cpu, " thousandths of a CPU"},
	} {
		if f.used+f.ask > f.have {
			return &Exceeded{Quota: f.name, RetryAfter: a.retryAfter(now),
				Detail: fmt.Sprintf("%d of %d%s in use, %d asked", f.used, f.have, f.unit, f.ask)}
		}
	}
	return nil
}

// retryAfter is when capacity is sure to come back at the latest, the first wall
// deadline of a's sessions, within [minRetry, maxRetry]: a session may end sooner,
// so a client is never told to stay away more than a minute. l.mu is held.
func (a *account) retryAfter(now time.Time) time.Duration {
	d := maxRetry
	for h := range a.held {
		d = min(d, h.deadline.Sub(now))
	}
	return clampRetry(d)
}

func clampRetry(d time.Duration) time.Duration {
	return min(max((d+time.Second-1).Truncate(time.Second), minRetry), maxRetry) // whole seconds, rounded up
}
