package tally

import (
	"strconv"
	"testing"

	"github.com/cordonhq/cordon/internal/event"
)

func (f *floodSink) allow(b event.NetBody) {
	f.s.Emit(event.Event{Type: event.NetAllow, Body: b})
}

// allowTallies counts the itemized net.allow lines and the attempts the summaries
// count, and sums the bytes up of both.
func (f *floodSink) allowTallies() (itemized, counted, up int64, summaries []event.NetAllowSummaryBody) {
	for _, e := range f.allows {
		if e.Type == event.NetAllow {
			itemized++
			up += e.Body.(event.NetBody).BytesUp
			continue
		}
		b := e.Body.(event.NetAllowSummaryBody)
		counted += b.Allowed
		up += b.BytesUp
		summaries = append(summaries, b)
	}
	return itemized, counted, up, summaries
}

// allowed is an allowed attempt to one of a few destinations that moved i bytes up,
// every third one carrying a credential.
func allowed(i, dests int) event.NetBody {
	return event.NetBody{Host: "d" + strconv.Itoa(i%dests) + ".allowed.test", Port: 443, Proto: "connect",
		BytesUp: int64(i), BytesDown: 2 * int64(i), Intercepted: i%3 == 0, Requests: i % 3 % 2}
}

// TestAllowBudgetItemizesThenCounts: a burst far past the allow budget itemizes
// allowBurst attempts and counts the rest; the summary names every destination with its
// own attempts and bytes, sums the bytes and the credential-carrying attempts, and
// itemized + counted is every attempt, the bytes of both every byte moved.
func TestAllowBudgetItemizesThenCounts(t *testing.T) {
	f := newFloodSink(t)
	f.s.Begin("1")
	const n = allowBurst + 3000
	var wantUp int64
	for i := range n {
		f.allow(allowed(i, 3))
		wantUp += int64(i)
	}
	itemized, _, _, sums := f.allowTallies()
	if itemized != allowBurst || len(sums) != 0 {
		t.Fatalf("before the timer: %d itemized, %d summaries; want %d and none", itemized, len(sums), allowBurst)
	}
	f.advance(summaryEvery)
	itemized, counted, up, sums := f.allowTallies()
	if len(sums) != 1 || itemized+counted != n || up != wantUp {
		t.Fatalf("%d itemized + %d counted in %d summaries, %d bytes up; want %d in one summary, %d bytes", itemized, counted, len(sums), up, n, wantUp)
	}
	s := sums[0]
	if s.Destinations != 3 || s.DestinationsAtLeast || len(s.Named) != 3 || s.Other != nil {
		t.Errorf("destinations %d (at least %v), named %v, other %v; want the 3 named", s.Destinations, s.DestinationsAtLeast, s.Named, s.Other)
	}
	var named event.AllowedTo
	for _, to := range s.Named {
		named = plusAllowed(named, to)
	}
	if named.Attempts != s.Allowed || named.BytesUp != s.BytesUp || named.BytesDown != 2*s.BytesUp || named.Intercepted != s.Intercepted || s.Intercepted != 1000 {
		t.Errorf("named add up to %+v; summary says %d attempts, %d up, %d down, %d intercepted (want 1000)", named, s.Allowed, s.BytesUp, s.BytesDown, s.Intercepted)
	}
	if e := f.allows[len(f.allows)-1]; e.Cmd != "1" {
		t.Errorf("summary of command %q; want 1", e.Cmd)
	}
}

// TestAllowBudgetDistinctBounded: past maxAllowNamedSent destinations (each sent bytes)
// the summary sums the rest under Other, and past maxAllowDistinct it says "at least"; no attempt or byte is
// lost from the sums.
func TestAllowBudgetDistinctBounded(t *testing.T) {
	f := newFloodSink(t)
	const n = allowBurst + maxAllowDistinct + 500
	for i := range n {
		f.allow(allowed(i, n))
	}
	f.s.Close()
	_, counted, _, sums := f.allowTallies()
	if len(sums) != 1 {
		t.Fatalf("%d summaries; want 1", len(sums))
	}
	s := sums[0]
	// Each destination was sent bytes: named up to the larger bound.
	if s.Destinations != maxAllowDistinct || !s.DestinationsAtLeast || len(s.Named) != maxAllowNamedSent || s.Other == nil {
		t.Fatalf("destinations %d (at least %v), %d named, other %v; want at least %d, %d named, the rest other", s.Destinations, s.DestinationsAtLeast, len(s.Named), s.Other, maxAllowDistinct, maxAllowNamedSent)
	}
	all := *s.Other
	for _, to := range s.Named {
		all = plusAllowed(all, to)
	}
	if all.Attempts != counted || all.Attempts != n-allowBurst || all.BytesUp != s.BytesUp || all.BytesDown != s.BytesDown {
		t.Errorf("named + other = %+v; want %d attempts, %d up, %d down", all, n-allowBurst, s.BytesUp, s.BytesDown)
	}
}

// TestBudgetsApart: an allow flood does not use up the deny budget, nor a deny flood
// the allow budget; one timer writes both summaries, and a command's end writes what is
// left of both before its cmd.end.
func TestBudgetsApart(t *testing.T) {
	f := newFloodSink(t)
	f.s.Begin("1")
	for i := range 3 * allowBurst {
		f.allow(allowed(i, 5))
	}
	for i := range denyBurst {
		f.deny(host(i))
	}
	denied, counted, _ := f.tally()
	if denied != denyBurst || counted != 0 {
		t.Fatalf("after an allow flood, %d of %d denials itemized (%d counted); want all", denied, denyBurst, counted)
	}
	for i := range 2 * denyBurst {
		f.deny(host(i))
	}
	f.advance(summaryEvery / 2)
	for i := range 10 {
		f.allow(allowed(i, 5)) // the allow bucket has refilled by half a second's rate
	}
	itemized, _, _, _ := f.allowTallies()
	if want := int64(allowBurst + 10); itemized != want {
		t.Errorf("after a deny flood, %d net.allow lines; want %d", itemized, want)
	}
	f.advance(summaryEvery / 2) // the one timer: both tallies were opened at once
	_, dcounted, dsums := f.tally()
	_, acounted, _, asums := f.allowTallies()
	if len(dsums) != 1 || len(asums) != 1 || dcounted != 2*denyBurst || acounted != 2*allowBurst {
		t.Errorf("timer wrote %d deny summaries (%d), %d allow summaries (%d); want one each, %d and %d", len(dsums), dcounted, len(asums), acounted, 2*denyBurst, 2*allowBurst)
	}
	for i := range allowBurst {
		f.allow(allowed(i, 5))
		f.deny(host(i))
	}
	f.s.Flush("1")
	_, dcounted, _ = f.tally()
	items, acounted, _, _ := f.allowTallies()
	if items+acounted != 4*allowBurst+10 || dcounted < 2*denyBurst+1 {
		t.Errorf("after the command's end, allowed %d+%d, denied counted %d; want %d allowed in all", items, acounted, dcounted, 4*allowBurst+10)
	}
}

// TestAllowBudgetNamesWhatWasSent: past maxAllowNamed destinations that moved nothing
// up, destinations sent bytes or a credential are still named, up to
// maxAllowNamedSent; a destination seen unnamed is named once it is sent bytes, its
// earlier attempts staying in Other; the sums still add up.
func TestAllowBudgetNamesWhatWasSent(t *testing.T) {
	f := newFloodSink(t)
	for range allowBurst {
		f.allow(allowed(0, 1)) // use up the burst
	}
	quiet := func(i int) event.NetBody {
		return event.NetBody{Host: "q" + strconv.Itoa(i) + ".allowed.test", Port: 443, Error: "refused"}
	}
	for i := range maxAllowNamed + 10 {
		f.allow(quiet(i))
	}
	late := quiet(maxAllowNamed + 5) // seen, not named, now sent a credential
	late.Intercepted, late.Error = true, ""
	f.allow(late)
	const sending = maxAllowNamedSent // more than the room left
	for i := range sending {
		f.allow(event.NetBody{Host: "s" + strconv.Itoa(i) + ".allowed.test", Port: 443, BytesUp: 1})
	}
	f.s.Close()
	_, counted, _, sums := f.allowTallies()
	if len(sums) != 1 {
		t.Fatalf("%d summaries; want 1", len(sums))
	}
	s := sums[0]
	if len(s.Named) != maxAllowNamedSent {
		t.Errorf("%d named; want %d", len(s.Named), maxAllowNamedSent)
	}
	if to := s.Named["q"+strconv.Itoa(maxAllowNamed+5)+".allowed.test:443"]; to.Attempts != 1 || to.Intercepted != 1 {
		t.Errorf("the destination sent a credential late is named as %+v; want its one attempt since", to)
	}
	if _, ok := s.Named["q"+strconv.Itoa(maxAllowNamed+6)+".allowed.test:443"]; ok {
		t.Errorf("a destination sent nothing named past %d", maxAllowNamed)
	}
	all := *s.Other
	for _, to := range s.Named {
		all = plusAllowed(all, to)
	}
	if all.Attempts != counted || all.BytesUp != s.BytesUp || s.BytesUp != sending || s.Intercepted != 1 || all.Intercepted != 1 {
		t.Errorf("named + other = %+v; summary %d attempts, %d up, %d intercepted", all, counted, s.BytesUp, s.Intercepted)
	}
	if want := maxAllowNamed + 10 + sending; s.Destinations != want {
		t.Errorf("%d destinations; want %d", s.Destinations, want)
	}
}

// TestAllowBudgetNamesWhatWasSentPastDistinct (red team, redallow): a flood of
// maxAllowDistinct destinations sent nothing fills the set told apart, with only
// maxAllowNamed of them named; an attempt that then sends bytes up to a fresh
// destination is still named (there is room for maxAllowNamedSent), not hidden in Other.
func TestAllowBudgetNamesWhatWasSentPastDistinct(t *testing.T) {
	f := newFloodSink(t)
	for range allowBurst {
		f.allow(allowed(0, 1)) // use up the burst
	}
	for i := range maxAllowDistinct {
		f.allow(event.NetBody{Host: "q" + strconv.Itoa(i) + ".allowed.test", Port: 443, Error: "refused"})
	}
	exfil := event.NetBody{Host: "exfil.allowed.test", Port: 443, BytesUp: 1 << 20}
	f.allow(exfil)
	f.allow(exfil)
	f.s.Close()
	_, _, _, sums := f.allowTallies()
	if len(sums) != 1 {
		t.Fatalf("%d summaries; want 1", len(sums))
	}
	s := sums[0]
	if to := s.Named["exfil.allowed.test:443"]; to.Attempts != 2 || to.BytesUp != 2<<20 {
		t.Errorf("the destination sent 2 MiB past %d distinct ones is named as %+v (other %+v); want its 2 attempts and bytes", maxAllowDistinct, to, s.Other)
	}
	if s.Other != nil && s.Other.BytesUp != 0 {
		t.Errorf("other holds %d bytes up; only the named destination was sent any", s.Other.BytesUp)
	}
	if !s.DestinationsAtLeast || s.Destinations != maxAllowDistinct {
		t.Errorf("destinations %d (at least %v); want at least %d", s.Destinations, s.DestinationsAtLeast, maxAllowDistinct)
	}
}

// TestAllowBudgetNamesPlainHTTPSent (red team, redallow): a plain-HTTP request that
// reached its destination sent it a request head the workload wrote (a URL, headers: up
// to 64 KiB), which bytes_up, counting only a body, does not count. Past the
// maxAllowNamed destinations named, a fresh destination sent such requests is still
// named; one the request never reached (no address dialled) is not.
func TestAllowBudgetNamesPlainHTTPSent(t *testing.T) {
	f := newFloodSink(t)
	for range allowBurst {
		f.allow(allowed(0, 1)) // use up the burst
	}
	for i := range maxAllowNamed {
		f.allow(event.NetBody{Host: "q" + strconv.Itoa(i) + ".allowed.test", Port: 443, Error: "refused"})
	}
	get := event.NetBody{Host: "exfil.allowed.test", Port: 80, Proto: "http", Addr: "192.0.2.1:80", BytesDown: 20}
	f.allow(get)
	f.allow(get)
	unreached := event.NetBody{Host: "unreached.allowed.test", Port: 80, Proto: "http", Error: "connection refused"}
	f.allow(unreached)
	f.s.Close()
	_, _, _, sums := f.allowTallies()
	if len(sums) != 1 {
		t.Fatalf("%d summaries; want 1", len(sums))
	}
	s := sums[0]
	if to := s.Named["exfil.allowed.test:80"]; to.Attempts != 2 {
		t.Errorf("the destination sent 2 plain-HTTP requests past %d named is named as %+v (other %+v); want its 2 attempts", maxAllowNamed, to, s.Other)
	}
	if _, ok := s.Named["unreached.allowed.test:80"]; ok {
		t.Errorf("a plain-HTTP request that reached nothing named past %d", maxAllowNamed)
	}
}
