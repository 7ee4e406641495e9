// Package event is the one small seam through which every part of cordon (runner, egress
// proxy, credential broker, monitor, gates) reports what happened during a run, and the
// schema of what it reports: one documented body struct per event [Type] (docs/audit.md
// describes exactly these; a test holds the two together). Emitters build these structs,
// readers get them back with [DecodeBody]. Only the audit package knows how events are
// stored; emitters depend on this package alone.
package event

import "time"

// Type names the kind of an event. The values are part of the audit log's schema.
type Type string

// Event types. Each carries the body struct named beside it; see docs/audit.md.
const (
	RunStart Type = "run.start" // [RunStartBody]
	CmdStart Type = "cmd.start" // [CmdStartBody]
	CmdEnd   Type = "cmd.end"   // [CmdEndBody]
	FSDiff   Type = "fs.diff"   // [FSDiffBody]
	NetAllow Type = "net.allow" // [NetBody]
	NetDeny  Type = "net.deny"  // [NetBody]
	// Denials past the run's budget, counted rather than itemized (see [NetDenySummaryBody]).
	NetDenySummary Type = "net.deny.summary" // [NetDenySummaryBody]
	// Allowed attempts past the run's (other) budget, counted (see [NetAllowSummaryBody]).
	NetAllowSummary Type = "net.allow.summary" // [NetAllowSummaryBody]
	CredIssue       Type = "cred.issue"        // [CredIssueBody]
	CredRevoke      Type = "cred.revoke"       // [CredRevokeBody]
	SyscallAlert    Type = "syscall.alert"     // [SyscallAlertBody]
	GateRequest     Type = "gate.request"      // [GateRequestBody]
	GateApprove     Type = "gate.approve"      // [GateDecisionBody]
	GateDeny        Type = "gate.deny"         // [GateDecisionBody]
	GateExec        Type = "gate.exec"         // [GateExecBody]
	RunEnd          Type = "run.end"           // [RunEndBody]
	// A staged session's checkpoint taken, and its workspace rolled back to one.
	SessionCheckpoint Type = "session.checkpoint" // [CheckpointBody]
	SessionRollback   Type = "session.rollback"   // [RollbackBody]
	// A staged run's changes landed or dropped, after its run.end (the only lines
	// that may follow it).
	StageApply   Type = "stage.apply"   // [StageBody]
	StageDiscard Type = "stage.discard" // [StageBody]
)

// Event is one thing that happened in a run. Body is the body struct of Type (a
// [CmdEndBody] for [CmdEnd], …); Cmd names the command that caused it when
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
