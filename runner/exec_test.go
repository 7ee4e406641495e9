package runner

import (
	"reflect"
	"strconv"
	"testing"

	"github.com/cordonhq/cordon/internal/event"
)

func TestCmdSinkDenied(t *testing.T) {
	s := &cmdSink{next: event.SinkFunc(func(event.Event) {})}
	s.push("c1")
	deny := func(b event.NetBody) { s.Emit(event.Event{Type: event.NetDeny, Body: b}) }
	rule := "network.allow: [{host: example.com, ports: [443]}]"
	deny(event.NetBody{Host: "example.com", Port: 443, Category: "not in network.allow", SuggestedRule: rule})
	deny(event.NetBody{Host: "example.com", Port: 443, Category: "not in network.allow", SuggestedRule: rule})
	deny(event.NetBody{Host: "::1", Port: 80})
	s.Emit(event.Event{Type: event.NetAllow, Body: event.NetBody{Host: "ok.com", Port: 443}})
	targets, denials := s.denied("c1")
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
	s.pop("c1")
	if targets, denials := s.denied("c1"); targets != nil || denials != nil {
		t.Errorf("after pop: %v %v", targets, denials)
	}
}

// TestCmdSinkDeniesBounded: a command denied far more often than maxDeniesKept (a
// flood of connections) keeps only that many for its result, and every deny still
// reaches the log.
func TestCmdSinkDeniesBounded(t *testing.T) {
	logged := 0
	s := &cmdSink{next: event.SinkFunc(func(e event.Event) {
		if e.Type == event.NetDeny {
			logged++
		}
	})}
	s.push("c1")
	const n = 3 * maxDeniesKept
	for i := range n {
		s.Emit(event.Event{Type: event.NetDeny, Body: event.NetBody{Host: "h" + strconv.Itoa(i) + ".example", Port: 80}})
	}
	targets, denials := s.denied("c1")
	if len(targets) != maxDeniesKept || len(denials) != maxDeniesKept {
		t.Errorf("kept %d targets and %d denials of %d; want %d of each", len(targets), len(denials), n, maxDeniesKept)
	}
	if logged != n {
		t.Errorf("%d denies reached the log; want all %d", logged, n)
	}
}

// TestDenyTargetOfAMalformedRequest: a request that named no destination is said to be
// one, not shown as ":0".
func TestDenyTargetOfAMalformedRequest(t *testing.T) {
	if got := denyTarget(event.NetBody{}); got != "a malformed request" {
		t.Errorf("denyTarget of no destination = %q", got)
	}
	if got := denyTarget(event.NetBody{Host: "example.com", Port: 443}); got != "example.com:443" {
		t.Errorf("denyTarget = %q", got)
	}
}
