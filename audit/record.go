package audit

import (
	"encoding/json"
	"time"

	"github.com/cordonhq/cordon/internal/event"
)

// Version is the schema version written in the "v" field of every line. A reader rejects
// any other value (see docs/audit.md for what may change within a version).
const Version = 1

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
	// Body is the type-specific object (see the body types of this package).
	Body json.RawMessage `json:"body"`
	Prev string          `json:"prev"` // Hash of the previous line; "" on line 1
	Hash string          `json:"hash"` // hex SHA-256 of the canonical encoding of this line
}

// DecodeBody decodes the body of r into v (for example a *CmdEnd).
func (r Record) DecodeBody(v any) error { return json.Unmarshal(r.Body, v) }

// RunStart is the body of run.start, the first line of every log.
type RunStart struct {
	ContractPath   string `json:"contract_path"`       // as given on the command line, made absolute
	ContractDigest string `json:"contract_digest"`     // "sha256:" + hex digest of the contract file's bytes
	Backend        string `json:"backend"`             // sandbox backend: "bwrap", "docker", …
	CordonVersion  string `json:"cordon_version"`      // version of the cordon binary
	Host           string `json:"host"`                // host name
	User           string `json:"user"`                // user name (or uid) that ran cordon
	Workspace      string `json:"workspace,omitempty"` // absolute path of the workspace
}

// CmdStart is the body of cmd.start. Its line's "cmd" field is its own seq, which the
// other events of the command carry.
type CmdStart struct {
	Argv []string `json:"argv"` // the command and its arguments
	Cwd  string   `json:"cwd"`  // working directory inside the sandbox
	// Env lists the NAMES of the environment variables, sorted; never values. The writer
	// strips anything from "=" on, should a caller pass NAME=value.
	Env []string `json:"env"`
}

// CmdEnd is the body of cmd.end.
type CmdEnd struct {
	ExitCode   int    `json:"exit_code"`        // the command's exit status (128+n when killed by signal n)
	Signal     string `json:"signal,omitempty"` // the signal that killed it, such as "SIGKILL"
	DurationMS int64  `json:"duration_ms"`      // wall time from start to exit
	Stdout     Output `json:"stdout"`
	Stderr     Output `json:"stderr"`
}

// Output summarises one output stream of a command; see [Capture].
type Output struct {
	Bytes  int64  `json:"bytes"`  // total bytes written
	SHA256 string `json:"sha256"` // hex digest of all of them
	// Head is the first bytes (at most the capture limit, cut at a UTF-8 boundary and
	// before any partial secret), redacted like every logged byte.
	Head      string `json:"head"`
	Truncated bool   `json:"truncated,omitempty"` // Head is shorter than the stream
}

// FSDiff is the body of fs.diff: what one command changed in the workspace.
type FSDiff struct {
	Files      int          `json:"files"`      // number of changed paths
	Insertions int          `json:"insertions"` // added lines over all text files
	Deletions  int          `json:"deletions"`  // deleted lines over all text files
	Changes    []FileChange `json:"changes"`    // one per changed path, sorted by path
	// Patch is the unified diff (redacted). When longer than the writer's inline limit it
	// is cut at a line boundary, PatchTruncated is set and the whole patch is in
	// PatchFile, a file next to events.jsonl whose SHA-256 is PatchSHA256.
	Patch          string   `json:"patch"`
	PatchBytes     int      `json:"patch_bytes"` // length of the whole (redacted) patch
	PatchTruncated bool     `json:"patch_truncated,omitempty"`
	PatchFile      string   `json:"patch_file,omitempty"`
	PatchSHA256    string   `json:"patch_sha256,omitempty"`
	Scan           ScanInfo `json:"scan"`
	// Problems lists entries that could not be scanned, one "path: reason" each.
	Problems []string `json:"problems,omitempty"`
	// Between marks a session's changes made outside any command's diff: when no
	// command ran (a background process of an earlier one, the host), or, with
	// During, while the commands named there ran. Such an event names no command.
	Between bool     `json:"between_commands,omitempty"`
	During  []string `json:"during,omitempty"`
	// Quarantined are nested git repositories the change created, renamed by cordon
	// to PATH.cordon-quarantine so that no git on the host obeys their config and
	// hooks (the change itself, the added .git, is in Changes).
	Quarantined []string `json:"quarantined,omitempty"`
}

// FileChange is one changed path in an [FSDiff].
type FileChange struct {
	Op        string `json:"op"`                   // "added", "deleted", "modified" or "renamed"
	Path      string `json:"path"`                 // slash-separated, relative to the workspace
	OldPath   string `json:"old_path,omitempty"`   // for "renamed"
	Kind      string `json:"kind"`                 // "text", "binary", "large", "symlink", "special" or "unreadable"
	OldMode   string `json:"old_mode,omitempty"`   // octal st_mode, such as "100644"
	NewMode   string `json:"new_mode,omitempty"`   // octal st_mode
	OldSize   int64  `json:"old_size"`             // bytes
	NewSize   int64  `json:"new_size"`             // bytes
	OldSHA256 string `json:"old_sha256,omitempty"` // hex digest of the old content
	NewSHA256 string `json:"new_sha256,omitempty"` // hex digest of the new content
	Added     int    `json:"added"`                // lines, text only
	Deleted   int    `json:"deleted"`              // lines, text only
}

// ScanInfo says what the snapshot behind an [FSDiff] cost.
type ScanInfo struct {
	Files      int   `json:"files"`       // entries in the workspace
	Read       int   `json:"read"`        // entries whose content was (re)read
	DurationMS int64 `json:"duration_ms"` // snapshot wall time
}

// Reasons a run ended, for [RunEnd.Reason].
const (
	ReasonExited    = "exited"    // the command exited by itself; ExitCode is its status
	ReasonTimeout   = "timeout"   // the timeout killed it (exit code 124)
	ReasonMonitor   = "monitor"   // the syscall monitor stopped it (exit code 137)
	ReasonSignal    = "signal"    // cordon was interrupted and stopped the run
	ReasonError     = "error"     // cordon could not run it or failed during the run (125)
	ReasonAuditFail = "audit"     // the audit log failed, the run was stopped (fail closed)
	ReasonCanceled  = "cancelled" // the caller cancelled the run
)

// RunEnd is the body of run.end, the sealing last line of a finished run.
type RunEnd struct {
	ExitCode int    `json:"exit_code"`        // what cordon exited with
	Reason   string `json:"reason"`           // one of the Reason constants
	Detail   string `json:"detail,omitempty"` // a one-line explanation, for errors
	Commands int    `json:"commands"`         // number of cmd.start lines (set by the writer)
	Dropped  int64  `json:"dropped"`          // events emitted after Close began (set by the writer)
}
