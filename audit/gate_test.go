package audit

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/event"
)

// TestGateEventsRender: the gate events verify and show in the timeline with their
// gate, id, argv, decider and reason.
func TestGateEventsRender(t *testing.T) {
	w, _ := newWriter(t, Options{})
	path := w.Path()
	cmd, _ := w.StartCmd(CmdStart{Argv: []string{"cordon", "gate", "push"}, Cwd: "/w"})
	argv := []string{"git", "push", "origin", "HEAD:refs/heads/agent/x"}
	w.Emit(event.Event{Type: event.GateRequest, Cmd: cmd, Body: map[string]any{"id": "3fa2c1d0", "gate": "push", "argv": argv, "approve": "human", "mode": "ask", "credential": "GITHUB_PUSH"}})
	w.Emit(event.Event{Type: event.GateApprove, Cmd: cmd, Body: map[string]any{"id": "3fa2c1d0", "gate": "push", "by": "alice"}})
	w.Emit(event.Event{Type: event.GateExec, Cmd: cmd, Body: map[string]any{"id": "3fa2c1d0", "gate": "push", "argv": argv, "exit_code": 0, "duration_ms": 812, "credential": "GITHUB_PUSH", "output_bytes": 120}})
	w.Emit(event.Event{Type: event.GateRequest, Body: map[string]any{"id": "77aa0011", "gate": "push", "argv": argv}})
	w.Emit(event.Event{Type: event.GateDeny, Body: map[string]any{"id": "77aa0011", "gate": "push", "by": "bob", "reason": "not today"}})
	w.Emit(event.Event{Type: event.CmdEnd, Cmd: cmd, Body: CmdEnd{}})
	if err := w.Close(RunEnd{Reason: ReasonExited}); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(path)
	if err != nil || !rep.OK() {
		t.Fatalf("Verify = %+v, %v", rep, err)
	}
	recs, err := ReadEvents(path)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteTimeline(&b, recs, TimelineOptions{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"gate request push 3fa2c1d0 git push origin HEAD:refs/heads/agent/x",
		"gate APPROVE push 3fa2c1d0 by=alice",
		"gate exec push 3fa2c1d0 git push",
		"gate DENY push 77aa0011 by=bob",
		"not today",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("timeline lacks %q:\n%s", want, out)
		}
	}
}
