package tally

import (
	"reflect"
	"strconv"
	"testing"

	"github.com/cordonhq/cordon/internal/event"
)

func TestCmdSinkDenied(t *testing.T) {
	s := &Sink{next: event.SinkFunc(func(event.Event) {})}
	s.Begin("c1")
	deny := func(b event.NetBody) { s.Emit(event.Event{Type: event.NetDeny, Body: b}) }
	rule := "network.allow: [{host: example.com, ports: [443]}]"
	deny(event.NetBody{Host: "example.com", Port: 443, Category: "not in network.allow", SuggestedRule: rule})
	deny(event.NetBody{Host: "example.com", Port: 443, Category: "not in network.allow", SuggestedRule: rule})
	deny(event.NetBody{Host: "::1", Port: 80})
	s.Emit(event.Event{Type: event.NetAllow, Body: event.NetBody{Host: "ok.com", Port: 443}})
	targets, denials, more := s.Denied("c1")
	if more != 0 {
		t.Errorf("%d more denials; want none past the 3 listed", more)
	}
	if want := []string{"example.com:443", "example.com:443", "[::1]:80"}; !reflect.DeepEqual(targets, want) {
		t.Errorf("targets %q, want %q", targets, want)
	}
	want := []Denial{
		{Destination: "example.com:443", Reason: "not in network.allow", SuggestedRule: rule},
		{Destination: "[::1]:80", Reason: "denied by contract"},
	}
	if !reflect.DeepEqual(denials, want) {
		t.Errorf("denials %+v, want %+v", denials, want)
	}
	s.End("c1")
	if targets, denials, _ := s.Denied("c1"); targets != nil || denials != nil {
		t.Errorf("after pop: %v %v", targets, denials)
	}
}

// TestCmdSinkDeniesBounded: a command denied far more often than maxDeniesKept (a
// flood of connections) keeps only that many for its result and counts the rest in
// DeniedMore, and every deny reaches the log: itemized, or counted in a summary.
func TestCmdSinkDeniesBounded(t *testing.T) {
	var logged, counted int64
	s := &Sink{next: event.SinkFunc(func(e event.Event) {
		switch e.Type {
		case event.NetDeny:
			logged++
		case event.NetDenySummary:
			counted += e.Body.(event.NetDenySummaryBody).Denied
		}
	})}
	s.Begin("c1")
	const n = 3 * maxDeniesKept
	for i := range n {
		s.Emit(event.Event{Type: event.NetDeny, Body: event.NetBody{Host: "h" + strconv.Itoa(i) + ".example", Port: 80}})
	}
	targets, denials, more := s.Denied("c1")
	if len(targets) != maxDeniesKept || len(denials) != maxDeniesKept || more != n-maxDeniesKept {
		t.Errorf("kept %d targets and %d denials of %d, %d more; want %d of each and %d more", len(targets), len(denials), n, more, maxDeniesKept, n-maxDeniesKept)
	}
	s.Close()
	if logged+counted != n {
		t.Errorf("%d denies itemized and %d counted; want all %d", logged, counted, n)
	}
}

// TestDenyTargetOfAMalformedRequest: a request that named no destination is said to be
// one, not shown as ":0".
func TestDenyTargetOfAMalformedRequest(t *testing.T) {
	if got := netTarget(event.NetBody{}); got != "a malformed request" {
		t.Errorf("netTarget of no destination = %q", got)
	}
	if got := netTarget(event.NetBody{Host: "example.com", Port: 443}); got != "example.com:443" {
		t.Errorf("netTarget = %q", got)
	}
}
