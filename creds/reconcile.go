package creds

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"
)

// Outcome is what [Broker.Reconcile] did with one grant of a run whose cordon is gone.
type Outcome struct {
	Run      string
	Name     string
	Provider string
	ID       string
	Expires  time.Time
	Result   string // Revoked, Expired or Failed
	Attempts int
	Err      error // why revocation failed (Expired or Failed)
}

// Reconcile settles the ledger after a crash: it revokes every recorded grant of a run
// whose cordon is no longer running, removes the records of grants revoked or expired,
// and lets providers that keep state expire it ([Sweeper]). Call it from `cordon gc`
// and at the start of every run, before [Broker.IssueAll].
//
// alive tells whether a run's cordon still runs; nil means the ledger's own record of
// the issuing process (pid and start time) decides, which is what callers on the same
// host want. Runs this broker serves are never touched. A grant that cannot be revoked
// stays in the ledger, is printed on Config.Alerts and makes Reconcile return
// [ErrNotRevoked]; Reconcile emits no events (the runs concerned have no open log).
func (b *Broker) Reconcile(ctx context.Context, alive func(run string) bool) ([]Outcome, error) {
	runs, err := b.ledger.runs()
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	mine := b.run
	b.mu.Unlock()
	var out []Outcome
	var errs []error
	for _, run := range runs {
		if run == mine {
			continue
		}
		recs, err := b.ledger.records(run)
		if err != nil {
			errs = append(errs, err)
		}
		if b.runAlive(run, recs, alive) {
			continue
		}
		for _, r := range recs {
			result, attempts, err := b.settle(ctx, r)
			out = append(out, Outcome{
				Run: r.Run, Name: r.Name, Provider: r.Provider, ID: r.ID, Expires: r.ExpiresAt,
				Result: result, Attempts: attempts, Err: err,
			})
			if rerr := b.report(r, result, attempts, err); rerr != nil {
				errs = append(errs, rerr)
			}
		}
		b.ledger.prune(run, len(recs) > 0)
	}
	now := b.now()
	for _, name := range slices.Sorted(maps.Keys(b.cfg.Providers)) {
		if s, ok := b.cfg.Providers[name].(Sweeper); ok {
			if err := s.Sweep(now); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return out, errors.Join(errs...)
}

func (b *Broker) runAlive(run string, recs []*record, alive func(string) bool) bool {
	if alive != nil {
		return alive(run)
	}
	for _, r := range recs {
		if r.Owner.Alive() {
			return true
		}
	}
	return false
}
