// Package event is the one small seam through which every part of cordon (runner, egress
// proxy, credential broker, monitor) reports what happened during a run. Only the audit
// package knows how events are stored; emitters depend on this package alone.
package event

import "time"

// Type names the kind of an event. The values are part of the audit log's schema.
type Type string

// Event types. See docs/audit.md for the body each one carries.
const (
	RunStart     Type = "run.start"
	CmdStart     Type = "cmd.start"
	CmdEnd       Type = "cmd.end"
	FSDiff       Type = "fs.diff"
	NetAllow     Type = "net.allow"
	NetDeny      Type = "net.deny"
	CredIssue    Type = "cred.issue"
	CredRevoke   Type = "cred.revoke"
	SyscallAlert Type = "syscall.alert"
	GateRequest  Type = "gate.request"
	GateApprove  Type = "gate.approve"
	GateDeny     Type = "gate.deny"
	GateExec     Type = "gate.exec"
	RunEnd       Type = "run.end"
)

// Event is one thing that happened in a run. Body is a JSON-marshalable value specific to
// Type (a struct with documented json tags); Cmd names the command that caused it when
// that is known (the cmd.start sequence number as a string, or "" when unknown).
type Event struct {
	Type Type
	Time time.Time // zero means "now" to the sink
	Cmd  string
	Body any
}

// Sink receives events. Implementations must be safe for concurrent use by multiple
// goroutines: the proxy, the monitor and the runner emit at the same time.
type Sink interface {
	Emit(Event)
}

// SinkFunc adapts a function to a Sink.
type SinkFunc func(Event)

// Emit implements Sink.
func (f SinkFunc) Emit(e Event) { f(e) }

// Discard is a Sink that drops every event.
var Discard Sink = SinkFunc(func(Event) {})
