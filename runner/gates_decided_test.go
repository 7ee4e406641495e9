package runner

import (
	"strings"
	"testing"
	"unicode/utf8"

	gatewire "github.com/cordonhq/cordon/gate/wire"
)

// TestGateDecisionsBounded: a command's result keeps its first maxGatesKept requests
// and counts the rest, cuts an operation's output at maxGateOutput on a character's
// start, and keeps nothing for a command not open (never begun, or whose result was
// taken): a process left from an ended command grows nothing.
func TestGateDecisionsBounded(t *testing.T) {
	var g gateDecisions
	g.keep("1", gatewire.Decided{Gate: "push"})
	g.open("1")
	big := strings.Repeat("é", maxGateOutput) // two bytes each
	for range maxGatesKept + 3 {
		g.keep("1", gatewire.Decided{Gate: "push", Outcome: &gatewire.Outcome{Approved: true, Output: big}})
	}
	kept, more := g.take("1")
	if len(kept) != maxGatesKept || more != 3 {
		t.Fatalf("kept %d, %d more; want %d and 3", len(kept), more, maxGatesKept)
	}
	for _, d := range kept {
		if o := d.Outcome.Output; !d.OutputCut || len(o) > maxGateOutput || !utf8.ValidString(o) {
			t.Fatalf("output of %d bytes (cut %v, valid %v); want at most %d, valid", len(o), d.OutputCut, utf8.ValidString(o), maxGateOutput)
		}
	}
	g.keep("1", gatewire.Decided{Gate: "push"})
	if kept, more := g.take("1"); len(kept) != 0 || more != 0 || len(g.by) != 0 {
		t.Fatalf("after its result was taken a command kept %d (+%d), %d open", len(kept), more, len(g.by))
	}
}
