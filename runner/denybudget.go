package runner

import (
	"sort"
	"time"

	"github.com/cordonhq/cordon/internal/event"
)

// The run's budget of net.deny lines. A workload can be denied as fast as it can
// connect (about 12,000 attempts a second past MaxConns, 4.7 MB of log a second), and
// varying the destination defeats any deduplication, so the log itemizes a burst and
// then a steady rate, and counts the rest in net.deny.summary lines (docs/audit.md).
//
// A legitimate workload is denied a handful of times (a missing rule, a retry loop
// backing off); even one that retries a denied host without backing off makes tens of
// attempts a second. 1000 at once and 100 a second after that itemize all of those,
// while a flood writes at most some 45 KB of net.deny lines a second.
const (
	denyBurst = 1000 // net.deny lines itemized at once, from a full budget
	denyRate  = 100  // net.deny lines a second the budget refills by, up to denyBurst

	// denySummaryEvery is how often a command's summary is written while it is flooded.
	denySummaryEvery = time.Second

	// Bounds on one summary line.
	maxDenyReasons  = 16   // kinds of denial counted apart; the rest count as "other"
	maxDenyDistinct = 1024 // destinations told apart; past that, "at least"
	maxDenyExamples = 5    // destinations named
)

// denyOtherReason is the kind past maxDenyReasons.
const denyOtherReason = "other"

// deniedByContract is the kind of a denial whose body names no category or reason, in
// the result's Denied and in a summary's Reasons alike.
const deniedByContract = "denied by contract"

// denyBudget is a run's token bucket of itemized net.deny lines, and the tallies of the
// denials past it, one per command, not yet written. Its caller holds the lock.
type denyBudget struct {
	tokens  float64
	last    time.Time             // when tokens was last refilled; zero before the first denial
	pending map[string]*denyTally // by cmd id ("" for none): counted since its last summary
	// unlimited is set once the run's last summary is written: what comes after that
	// (nothing should) is itemized rather than counted where no one would write it.
	unlimited bool
}

// denyTally is the summary of one command's denials past the budget, being counted.
type denyTally struct {
	body event.NetDenySummaryBody
	seen map[string]struct{} // distinct destinations, at most maxDenyDistinct
}

// itemize reports whether a denial at now gets a net.deny line of its own, taking one
// from the budget when it does.
func (b *denyBudget) itemize(now time.Time) bool {
	if b.unlimited {
		return true
	}
	if b.last.IsZero() {
		b.tokens = denyBurst
	} else if d := now.Sub(b.last); d > 0 {
		b.tokens = min(denyBurst, b.tokens+d.Seconds()*denyRate)
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// count adds a denial that was not itemized to its command's tally. It reports whether
// the tally is new, that is whether a summary is now due in denySummaryEvery.
func (b *denyBudget) count(cmd string, nb event.NetBody, now time.Time) (opened bool) {
	t := b.pending[cmd]
	if t == nil {
		if b.pending == nil {
			b.pending = map[string]*denyTally{}
		}
		t = &denyTally{body: event.NetDenySummaryBody{Reasons: map[string]int64{}, First: now}, seen: map[string]struct{}{}}
		b.pending[cmd] = t
		opened = true
	}
	s := &t.body
	s.Denied++
	s.Last = now
	reason := nb.Category
	if reason == "" {
		reason = nb.Reason
	}
	if reason == "" {
		reason = deniedByContract
	}
	if _, ok := s.Reasons[reason]; !ok && len(s.Reasons) >= maxDenyReasons-1 && reason != denyOtherReason {
		reason = denyOtherReason
	}
	s.Reasons[reason]++
	if nb.Host == "" && nb.Port == 0 {
		return opened // named no destination
	}
	dest := denyTarget(nb)
	if _, ok := t.seen[dest]; ok {
		return opened
	}
	if len(t.seen) >= maxDenyDistinct {
		s.DestinationsAtLeast = true
		return opened
	}
	t.seen[dest] = struct{}{}
	s.Destinations++
	if len(s.Examples) < maxDenyExamples {
		s.Examples = append(s.Examples, dest)
	}
	return opened
}

// take removes and returns as net.deny.summary events the tallies that are due: those
// opened denySummaryEvery or more before now, or, when all is set, every one of cmd
// (every one of the run when cmd is nil). next is when the earliest tally left is due,
// zero when none is left.
func (b *denyBudget) take(now time.Time, cmd *string, all bool) (due []event.Event, next time.Time) {
	for id, t := range b.pending {
		at := t.body.First.Add(denySummaryEvery)
		if (all && (cmd == nil || *cmd == id)) || !now.Before(at) {
			due = append(due, event.Event{Type: event.NetDenySummary, Time: now, Cmd: id, Body: t.body})
			delete(b.pending, id)
			continue
		}
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	sort.Slice(due, func(i, j int) bool {
		return due[i].Body.(event.NetDenySummaryBody).First.Before(due[j].Body.(event.NetDenySummaryBody).First)
	})
	return due, next
}
