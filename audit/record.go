package audit

import (
	"encoding/json"
	"time"

	"github.com/cordonhq/cordon/internal/event"
)

// Version is the schema version written in the "v" field of every line,
// [event.SchemaVersion]. A reader rejects any other value (see docs/audit.md for what
// may change within a version).
const Version = event.SchemaVersion

// EventsFile is the name of the log inside a run directory.
const EventsFile = "events.jsonl"

// Record is one line of events.jsonl. Lines are written with the fields in exactly this
// order and no insignificant white space; see docs/audit.md for the canonical encoding
// that Hash covers.
type Record struct {
	V    int        `json:"v"`             // schema version, always Version
	Seq  int64      `json:"seq"`           // 1 for run.start, then +1 per line
	TS   time.Time  `json:"ts"`            // when it happened, UTC, RFC 3339 with 9 fraction digits
	Run  string     `json:"run"`           // run id, the same on every line
	Type event.Type `json:"type"`          // event type, such as "cmd.end"
	Cmd  string     `json:"cmd,omitempty"` // the seq of the cmd.start this event belongs to
	// Body is the type-specific object, the JSON of the type's body struct in
	// internal/event (see [event.DecodeBody]).
	Body json.RawMessage `json:"body"`
	Prev string          `json:"prev"` // Hash of the previous line; "" on line 1
	Hash string          `json:"hash"` // hex SHA-256 of the canonical encoding of this line
}

// DecodeBody decodes the body of r into v (for example a *CmdEnd).
func (r Record) DecodeBody(v any) error { return json.Unmarshal(r.Body, v) }

// The bodies of the events audit writes itself. They are the schema's structs in
// internal/event (this package's API names them); see docs/audit.md.
type (
	RunStart   = event.RunStartBody // run.start, written by [Create]
	CmdStart   = event.CmdStartBody // cmd.start, written by [Writer.StartCmd]
	CmdEnd     = event.CmdEndBody   // cmd.end, emitted by the runner
	Output     = event.Output       // one output stream of a [CmdEnd]; see [Capture]
	FSDiff     = event.FSDiffBody   // fs.diff, written by [Writer.RecordDiff]
	FileChange = event.FileChange   // one changed path in an [FSDiff]
	DiffGap    = event.DiffGap      // what a bounded [FSDiff] left out
	ScanInfo   = event.ScanInfo     // what the snapshot behind an [FSDiff] cost
	RunEnd     = event.RunEndBody   // run.end, written by [Writer.Close]
)

// Reasons a run ended, for [RunEnd.Reason].
const (
	ReasonExited    = event.ReasonExited    // the command exited by itself; ExitCode is its status
	ReasonTimeout   = event.ReasonTimeout   // the timeout killed it (exit code 124)
	ReasonMonitor   = event.ReasonMonitor   // the syscall monitor stopped it (exit code 137)
	ReasonSignal    = event.ReasonSignal    // cordon was interrupted and stopped the run
	ReasonError     = event.ReasonError     // cordon could not run it or failed during the run (125)
	ReasonAuditFail = event.ReasonAuditFail // the audit log failed, the run was stopped (fail closed)
	ReasonCanceled  = event.ReasonCanceled  // the caller cancelled the run
)
