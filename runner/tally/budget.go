package tally

import (
	"net"
	"sort"
	"strconv"
	"time"

	"github.com/cordonhq/cordon/internal/event"
)

// The run's budgets of log lines, one per kind of line a workload can make as fast as
// it can connect: net.deny (denybudget.go) and net.allow (allowbudget.go). Each is a
// token bucket that itemizes a burst and then a steady rate; past it a line is counted
// in its command's tally of that kind, which the sink writes as a summary line (a
// net.deny.summary, a net.allow.summary) at most once every summaryEvery while the
// flood lasts, at the command's end and at the run's end (docs/audit.md). The kinds
// keep apart buckets, so that a flood of one does not use up the other's budget, and
// share the rest: the counting, the summary timer and the order of the summaries.

// summaryEvery is how often a command's summary of a kind is written while it is flooded.
const summaryEvery = time.Second

// lineTally counts, for one command, the lines of one kind its budget did not itemize, for
// the summary line that stands for them.
type lineTally interface {
	// add counts an event's body, at now.
	add(b event.NetBody, now time.Time)
	// opened is when the first of them was counted.
	opened() time.Time
	// summary is the summary line of command cmd, at now.
	summary(cmd string, now time.Time) event.Event
}

// lineBudget is the token bucket of one kind of itemized lines, and the tallies of
// those past it, one per command, not yet written. Its caller holds the lock.
type lineBudget struct {
	burst, rate float64                       // lines itemized at once from full, and refilled a second
	open        func(now time.Time) lineTally // a new tally, its first line counted at now

	tokens  float64
	last    time.Time            // when tokens was last refilled; zero before the first line
	pending map[string]lineTally // by cmd id ("" for none): counted since its last summary
}

// itemize reports whether a line at now is itemized, taking one from the bucket when it is.
func (b *lineBudget) itemize(now time.Time) bool {
	if b.last.IsZero() {
		b.tokens = b.burst
	} else if d := now.Sub(b.last); d > 0 {
		b.tokens = min(b.burst, b.tokens+d.Seconds()*b.rate)
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// count adds a line that was not itemized to its command's tally. It reports whether
// the tally is new, that is whether a summary is now due in summaryEvery.
func (b *lineBudget) count(cmd string, nb event.NetBody, now time.Time) (opened bool) {
	t := b.pending[cmd]
	if t == nil {
		if b.pending == nil {
			b.pending = map[string]lineTally{}
		}
		t = b.open(now)
		b.pending[cmd] = t
		opened = true
	}
	t.add(nb, now)
	return opened
}

// dueSummary is a summary line taken off a budget, and when its tally was opened.
type dueSummary struct {
	e      event.Event
	opened time.Time
}

// take removes the tallies that are due and appends their summaries to due: those
// opened summaryEvery or more before now, or, when all is set, every one of cmd (every
// one of the run when cmd is nil). next is when the earliest tally left is due, zero
// when none is left.
func (b *lineBudget) take(due []dueSummary, now time.Time, cmd *string, all bool) (_ []dueSummary, next time.Time) {
	for id, t := range b.pending {
		at := t.opened().Add(summaryEvery)
		if (all && (cmd == nil || *cmd == id)) || !now.Before(at) {
			due = append(due, dueSummary{e: t.summary(id, now), opened: t.opened()})
			delete(b.pending, id)
			continue
		}
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return due, next
}

// budgets are a run's line budgets by the type of line each bounds. Its caller holds
// the lock.
type budgets struct {
	kinds map[event.Type]*lineBudget // made on first use
	// unlimited is set once the run's last summaries are written: what comes after that
	// (nothing should) is itemized rather than counted where no one would write it.
	unlimited bool
}

// of returns the budget of lines of type t, nil when no budget bounds them (or none
// does any more).
func (bs *budgets) of(t event.Type) *lineBudget {
	if bs.unlimited {
		return nil
	}
	if bs.kinds == nil {
		bs.kinds = map[event.Type]*lineBudget{
			event.NetDeny:  {burst: denyBurst, rate: denyRate, open: openDenyTally},
			event.NetAllow: {burst: allowBurst, rate: allowRate, open: openAllowTally},
		}
	}
	return bs.kinds[t]
}

// take removes the tallies of every kind that are due, as lineBudget.take says, and
// returns their summaries in the order their tallies were opened. next is when the
// earliest tally left is due, zero when none is left.
func (bs *budgets) take(now time.Time, cmd *string, all bool) (due []event.Event, next time.Time) {
	var ds []dueSummary
	for _, b := range bs.kinds {
		var at time.Time
		ds, at = b.take(ds, now, cmd, all)
		if !at.IsZero() && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	sort.SliceStable(ds, func(i, j int) bool {
		if !ds[i].opened.Equal(ds[j].opened) {
			return ds[i].opened.Before(ds[j].opened)
		}
		return ds[i].e.Type < ds[j].e.Type
	})
	for _, d := range ds {
		due = append(due, d.e)
	}
	return due, next
}

// netTarget is "host:port" of a net.allow or net.deny body, or "a malformed request"
// when the request named no destination at all (a forward-proxy request cordon could
// not parse).
func netTarget(c event.NetBody) string {
	if c.Host == "" && c.Port == 0 {
		return "a malformed request"
	}
	return net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port)))
}
