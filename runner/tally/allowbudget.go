package tally

import (
	"time"

	"github.com/cordonhq/cordon/internal/event"
)

// The run's budget of net.allow lines (budget.go), a bucket apart from the deny
// budget's. One allowed host:port is enough to write net.allow lines as fast as the
// workload can connect (a CONNECT to an allowed port with nothing listening: 5,000 in
// 1.45 s, 2.2 MB; eight such loops some 5 GB an hour), so the log itemizes a burst and
// then a steady rate, and counts the rest in net.allow.summary lines (docs/audit.md).
//
// Every allowed attempt is counted alike past the budget, whether it moved bytes or
// carried a credential: exempting either would leave the flood open (kept-alive plain
// HTTP moves bytes on every request). The summary keeps what a reviewer needs to know
// what left the machine: the bytes summed, the credential-carrying attempts counted,
// and the destinations named with their own attempts and bytes, up to a bound (a larger
// one for destinations sent bytes or a credential), past which they are counted ("at
// least") and their traffic summed under Other.
//
// A legitimate workload's allowed attempts come in bursts (a package install: hundreds
// of fetches, most on kept-alive connections) and rarely last at 100 a second; 2000 at
// once and 100 a second after that itemize those, while a flood writes at most some
// 45 KB of net.allow lines a second.
const (
	allowBurst = 2000 // net.allow lines itemized at once, from a full budget
	allowRate  = 100  // net.allow lines a second the budget refills by, up to allowBurst

	// Bounds on one summary line.
	maxAllowDistinct = 1024 // destinations told apart; past that, "at least"
	maxAllowNamed    = 64   // destinations named, each with its own counts
	// maxAllowNamedSent is how many destinations are named when those past
	// maxAllowNamed were sent bytes or a credential: what left the machine is named first.
	maxAllowNamedSent = 256
)

// plainHTTP is the event.NetBody.Proto of a plain-HTTP request forwarded by the proxy.
const plainHTTP = "http"

// allowTally is the summary of one command's allowed attempts past the budget, being
// counted. It implements lineTally.
type allowTally struct {
	body event.NetAllowSummaryBody
	seen map[string]struct{} // distinct destinations, at most maxAllowDistinct
}

func openAllowTally(now time.Time) lineTally {
	return &allowTally{body: event.NetAllowSummaryBody{Named: map[string]event.AllowedTo{}, First: now}, seen: map[string]struct{}{}}
}

func (t *allowTally) opened() time.Time { return t.body.First }

func (t *allowTally) summary(cmd string, now time.Time) event.Event {
	return event.Event{Type: event.NetAllowSummary, Time: now, Cmd: cmd, Body: t.body}
}

func (t *allowTally) add(nb event.NetBody, now time.Time) {
	s := &t.body
	s.Allowed++
	s.Last = now
	s.BytesUp += nb.BytesUp
	s.BytesDown += nb.BytesDown
	s.Requests += int64(nb.Requests)
	if nb.Error != "" {
		s.Failed++
	}
	to := event.AllowedTo{Attempts: 1, BytesUp: nb.BytesUp, BytesDown: nb.BytesDown}
	if nb.Intercepted {
		s.Intercepted++
		to.Intercepted = 1
	}
	dest := netTarget(nb)
	if named, ok := s.Named[dest]; ok {
		s.Named[dest] = plusAllowed(named, to)
		return
	}
	_, seen := t.seen[dest]
	if !seen && len(t.seen) >= maxAllowDistinct {
		s.DestinationsAtLeast = true
	} else if !seen {
		t.seen[dest] = struct{}{}
		s.Destinations++
		seen = true
	}
	// A destination told apart is named while there is room; one sent bytes or a
	// credential while there is more (from then on: its attempts before stay in Other),
	// told apart or not: past maxAllowDistinct destinations sent nothing, what left the
	// machine is still named, not hidden in Other (Named bounds it). A plain-HTTP request
	// that reached its destination (an address dialled) sent it a head the workload wrote,
	// a URL and headers up to 64 KiB, that BytesUp (a body's) does not count.
	sent := nb.BytesUp > 0 || nb.Intercepted || nb.Proto == plainHTTP && nb.Addr != ""
	if seen && len(s.Named) < maxAllowNamed || sent && len(s.Named) < maxAllowNamedSent {
		s.Named[dest] = to
		return
	}
	if s.Other == nil {
		s.Other = &event.AllowedTo{}
	}
	*s.Other = plusAllowed(*s.Other, to)
}

func plusAllowed(a, b event.AllowedTo) event.AllowedTo {
	return event.AllowedTo{
		Attempts:    a.Attempts + b.Attempts,
		BytesUp:     a.BytesUp + b.BytesUp,
		BytesDown:   a.BytesDown + b.BytesDown,
		Intercepted: a.Intercepted + b.Intercepted,
	}
}
