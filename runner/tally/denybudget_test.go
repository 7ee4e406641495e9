package tally

import (
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/event"
)

// floodSink is a Sink on a fake clock whose summary timer the test fires, and what
// it passed on to the log.
type floodSink struct {
	t      *testing.T
	s      *Sink
	now    time.Time
	timer  func() // the armed summary timer's function, nil when none is armed
	at     time.Time
	lines  []event.Event // net.deny and net.deny.summary, in order
	allows []event.Event // net.allow and net.allow.summary, in order
}

func newFloodSink(t *testing.T) *floodSink {
	f := &floodSink{t: t, now: time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)}
	f.s = &Sink{
		next: event.SinkFunc(func(e event.Event) {
			switch e.Type {
			case event.NetDeny, event.NetDenySummary:
				f.lines = append(f.lines, e)
			case event.NetAllow, event.NetAllowSummary:
				f.allows = append(f.allows, e)
			}
		}),
		now: func() time.Time { return f.now },
		schedule: func(d time.Duration, fn func()) func() bool {
			if f.timer != nil {
				t.Errorf("a second summary timer armed while one is")
			}
			f.timer, f.at = fn, f.now.Add(d)
			return func() bool { f.timer = nil; return true }
		},
	}
	return f
}

// advance moves the clock on by d, firing the summary timer when it is due.
func (f *floodSink) advance(d time.Duration) {
	f.now = f.now.Add(d)
	if f.timer != nil && !f.now.Before(f.at) {
		fn := f.timer
		f.timer = nil
		fn()
	}
}

func (f *floodSink) deny(b event.NetBody) {
	f.s.Emit(event.Event{Type: event.NetDeny, Body: b})
}

// tally counts the itemized net.deny lines and the denials the summaries count.
func (f *floodSink) tally() (itemized, counted int64, summaries []event.NetDenySummaryBody) {
	for _, e := range f.lines {
		if e.Type == event.NetDeny {
			itemized++
			continue
		}
		b := e.Body.(event.NetDenySummaryBody)
		counted += b.Denied
		summaries = append(summaries, b)
	}
	return itemized, counted, summaries
}

func host(i int) event.NetBody {
	return event.NetBody{Host: "h" + strconv.Itoa(i) + ".flood.invalid", Port: 443, Category: "not in network.allow"}
}

// TestDenyBudgetItemizesThenCounts: a burst far past the budget itemizes denyBurst
// denials and counts the rest; the summary the timer writes a second later says how
// many, by kind, how many destinations (at least, past the bound) and names a few, and
// itemized + counted is every attempt.
func TestDenyBudgetItemizesThenCounts(t *testing.T) {
	f := newFloodSink(t)
	f.s.Begin("1")
	const n = 3000
	for i := range n {
		if i%2 == 0 {
			f.deny(host(i))
		} else {
			f.deny(event.NetBody{Reason: "too many connections (limit 256)"})
		}
	}
	itemized, _, sums := f.tally()
	if itemized != denyBurst || len(sums) != 0 {
		t.Fatalf("before the timer: %d itemized, %d summaries; want %d and none", itemized, len(sums), denyBurst)
	}
	if f.timer == nil {
		t.Fatal("no summary timer armed for the denials counted")
	}
	f.advance(summaryEvery)
	itemized, counted, sums := f.tally()
	if len(sums) != 1 || itemized+counted != n {
		t.Fatalf("after the timer: %d itemized + %d counted in %d summaries; want %d in one", itemized, counted, len(sums), n)
	}
	s := sums[0]
	// The first denyBurst alternate the two kinds, the rest too: half of each.
	want := map[string]int64{"not in network.allow": (n - denyBurst) / 2, "too many connections (limit 256)": (n - denyBurst) / 2}
	if !mapsEqual(s.Reasons, want) {
		t.Errorf("reasons %v; want %v", s.Reasons, want)
	}
	if s.Destinations != (n-denyBurst)/2 || s.DestinationsAtLeast {
		t.Errorf("destinations %d (at least: %v); want %d exactly", s.Destinations, s.DestinationsAtLeast, (n-denyBurst)/2)
	}
	if want := []string{"h1000.flood.invalid:443", "h1002.flood.invalid:443", "h1004.flood.invalid:443", "h1006.flood.invalid:443", "h1008.flood.invalid:443"}; !slices.Equal(s.Examples, want) {
		t.Errorf("examples %q; want %q", s.Examples, want)
	}
	if f.lines[len(f.lines)-1].Cmd != "1" {
		t.Errorf("summary of command %q; want 1", f.lines[len(f.lines)-1].Cmd)
	}
	if _, _, more := f.s.Denied("1"); more != n-maxDeniesKept {
		t.Errorf("the result counts %d more denials; want %d", more, n-maxDeniesKept)
	}
}

// TestDenyBudgetDistinctBounded: past maxDenyDistinct destinations the summary says
// "at least", and past maxDenyReasons kinds the rest are "other".
func TestDenyBudgetDistinctBounded(t *testing.T) {
	f := newFloodSink(t)
	n := denyBurst + maxDenyDistinct + 500
	for i := range n {
		b := host(i)
		b.Category = "kind " + strconv.Itoa(i%40)
		f.deny(b)
	}
	f.s.Close()
	itemized, counted, sums := f.tally()
	if itemized+counted != int64(n) || len(sums) != 1 {
		t.Fatalf("%d itemized + %d counted in %d summaries; want %d in one", itemized, counted, len(sums), n)
	}
	s := sums[0]
	if s.Destinations != maxDenyDistinct || !s.DestinationsAtLeast {
		t.Errorf("destinations %d (at least: %v); want at least %d", s.Destinations, s.DestinationsAtLeast, maxDenyDistinct)
	}
	var sum int64
	for _, c := range s.Reasons {
		sum += c
	}
	if len(s.Reasons) != maxDenyReasons || s.Reasons[denyOtherReason] == 0 || sum != s.Denied {
		t.Errorf("%d kinds (other: %d), summing to %d of %d; want %d kinds with other", len(s.Reasons), s.Reasons[denyOtherReason], sum, s.Denied, maxDenyReasons)
	}
}

// TestDenyBudgetUnderBudget: denials at a rate under the budget's, even long past the
// burst, are each itemized: no summary, no timer.
func TestDenyBudgetUnderBudget(t *testing.T) {
	f := newFloodSink(t)
	f.s.Begin("1")
	const n = 10 * denyBurst
	for i := range n {
		f.deny(host(i))
		f.advance(time.Second / (denyRate - 10))
	}
	f.s.Flush("1")
	f.s.Close()
	itemized, counted, sums := f.tally()
	if itemized != n || counted != 0 || len(sums) != 0 || f.timer != nil {
		t.Errorf("%d itemized, %d counted in %d summaries (timer armed: %v); want all %d itemized", itemized, counted, len(sums), f.timer != nil, n)
	}
}

// TestDenyBudgetSustainedFlood: a flood that lasts gets one summary a second, each
// counting only what the one before did not, the budget refilling at denyRate; the
// command's end writes what is left before its cmd.end, and what is denied after it
// (no command running) is written at the run's end.
func TestDenyBudgetSustainedFlood(t *testing.T) {
	f := newFloodSink(t)
	f.s.Begin("1")
	const perSecond, seconds = 10000, 5
	attempts := 0
	for range seconds * perSecond {
		f.deny(host(attempts))
		attempts++
		f.advance(time.Second / perSecond)
	}
	f.deny(host(attempts)) // the last one, after the last summary: only the end writes it
	attempts++
	itemized, _, sums := f.tally()
	if len(sums) != seconds-1 && len(sums) != seconds {
		t.Errorf("%d summaries in a %d s flood; want one a second", len(sums), seconds)
	}
	if max := int64(denyBurst + seconds*denyRate + 1); itemized > max {
		t.Errorf("%d itemized in %d s; want at most %d", itemized, seconds, max)
	}
	var last time.Time
	for _, e := range f.lines {
		if e.Type != event.NetDenySummary {
			continue
		}
		if !last.IsZero() && e.Time.Sub(last) < summaryEvery {
			t.Errorf("summaries %s apart; want at most one a second", e.Time.Sub(last))
		}
		last = e.Time
	}
	f.s.Flush("1")
	f.s.End("1")
	if _, c, _ := f.tally(); itemized+c != int64(attempts) {
		t.Errorf("at the command's end: %d itemized + %d counted; want %d", itemized, c, attempts)
	}
	if e := f.lines[len(f.lines)-1]; e.Type != event.NetDenySummary || e.Cmd != "1" {
		t.Errorf("the command's end wrote %s of command %q last; want its summary", e.Type, e.Cmd)
	}
	for range 10 {
		f.deny(event.NetBody{}) // between commands, past the budget
		attempts++
	}
	f.s.Close()
	f.s.Close()
	itemized, counted, _ := f.tally()
	if itemized+counted != int64(attempts) {
		t.Errorf("at the run's end: %d itemized + %d counted; want %d", itemized, counted, attempts)
	}
	if e := f.lines[len(f.lines)-1]; e.Type != event.NetDenySummary || e.Cmd != "" || e.Body.(event.NetDenySummaryBody).Destinations != 0 {
		t.Errorf("the run's end wrote %s of command %q, %+v; want the summary of no command, naming no destination", e.Type, e.Cmd, e.Body)
	}
	if f.timer != nil {
		t.Error("the summary timer is still armed after close")
	}
	f.deny(host(0))
	if e := f.lines[len(f.lines)-1]; e.Type != event.NetDeny {
		t.Errorf("a denial after close was %s; want it itemized", e.Type)
	}
}

func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestDenySummaryNotLostToClose (red team): the summary timer fires as the run ends.
// What the timer has taken must reach the log before close returns, since teardown
// seals the log right after (an event emitted to a sealed log is dropped): otherwise a
// count of denials vanishes, neither itemized nor counted. Here two commands' tallies
// are due; while the timer writes the first, the run ends (close, then the seal) on
// another goroutine. Without the sink's flush lock the second tally was lost in most
// rounds.
func TestDenySummaryNotLostToClose(t *testing.T) {
	for round := range 200 {
		var (
			mu           sync.Mutex
			sealed       bool
			logged, lost int64
			ended        = make(chan struct{})
			fire         func()
			s            *Sink
		)
		s = &Sink{
			next: event.SinkFunc(func(e event.Event) {
				b, ok := e.Body.(event.NetDenySummaryBody)
				if !ok {
					return
				}
				mu.Lock()
				first := logged+lost == 0
				if sealed {
					lost += b.Denied
				} else {
					logged += b.Denied
				}
				mu.Unlock()
				if first {
					go func() {
						s.Close()
						mu.Lock()
						sealed = true // teardown seals the log once close has returned
						mu.Unlock()
						close(ended)
					}()
					for range 100 {
						runtime.Gosched()
					}
				}
			}),
			schedule: func(d time.Duration, fn func()) func() bool { fire = fn; return func() bool { return true } },
		}
		at := time.Now()
		s.now = func() time.Time { return at }
		for i := range denyBurst + 20 {
			s.Emit(event.Event{Type: event.NetDeny, Cmd: strconv.Itoa(1 + i%2), Body: host(i)})
		}
		at = at.Add(summaryEvery) // both are due
		fire()
		<-ended
		if lost != 0 || logged != 20 {
			t.Fatalf("round %d: %d denials counted in the log, %d lost to its sealing; want all 20 logged", round, logged, lost)
		}
	}
}
