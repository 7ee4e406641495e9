package tally

import (
	"time"

	"github.com/cordonhq/cordon/internal/event"
)

// The run's budget of net.deny lines (budget.go). A workload can be denied as fast as
// it can connect (about 12,000 attempts a second past MaxConns, 4.7 MB of log a
// second), and varying the destination defeats any deduplication, so the log itemizes a
// burst and then a steady rate, and counts the rest in net.deny.summary lines
// (docs/audit.md).
//
// A legitimate workload is denied a handful of times (a missing rule, a retry loop
// backing off); even one that retries a denied host without backing off makes tens of
// attempts a second. 1000 at once and 100 a second after that itemize all of those,
// while a flood writes at most some 45 KB of net.deny lines a second.
const (
	denyBurst = 1000 // net.deny lines itemized at once, from a full budget
	denyRate  = 100  // net.deny lines a second the budget refills by, up to denyBurst

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

// denyTally is the summary of one command's denials past the budget, being counted.
// It implements lineTally.
type denyTally struct {
	body event.NetDenySummaryBody
	seen map[string]struct{} // distinct destinations, at most maxDenyDistinct
}

func openDenyTally(now time.Time) lineTally {
	return &denyTally{body: event.NetDenySummaryBody{Reasons: map[string]int64{}, First: now}, seen: map[string]struct{}{}}
}

func (t *denyTally) opened() time.Time { return t.body.First }

func (t *denyTally) summary(cmd string, now time.Time) event.Event {
	return event.Event{Type: event.NetDenySummary, Time: now, Cmd: cmd, Body: t.body}
}

func (t *denyTally) add(nb event.NetBody, now time.Time) {
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
		return // named no destination
	}
	dest := netTarget(nb)
	if _, ok := t.seen[dest]; ok {
		return
	}
	if len(t.seen) >= maxDenyDistinct {
		s.DestinationsAtLeast = true
		return
	}
	t.seen[dest] = struct{}{}
	s.Destinations++
	if len(s.Examples) < maxDenyExamples {
		s.Examples = append(s.Examples, dest)
	}
}
