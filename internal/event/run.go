package event

// RunStartBody is the body of run.start, the first line of every log.
type RunStartBody struct {
	ContractPath   string `json:"contract_path"`       // as given on the command line, made absolute
	ContractDigest string `json:"contract_digest"`     // "sha256:" + hex digest of the contract file's bytes
	Backend        string `json:"backend"`             // sandbox backend: "bwrap", "docker", …
	CordonVersion  string `json:"cordon_version"`      // version of the cordon binary
	Host           string `json:"host"`                // host name
	User           string `json:"user"`                // user name (or uid) that ran cordon
	Workspace      string `json:"workspace,omitempty"` // absolute path of the workspace
	// SandboxUID is the host uid (and gid) the sandbox runs as, where the backend says
	// (bwrap): one leased to this run alone from cordon's range when root owns the
	// workspace, else the workspace owner's or cordon's own.
	SandboxUID int `json:"sandbox_uid,omitempty"`
}

// CmdStartBody is the body of cmd.start. Its line's "cmd" field is its own seq, which the
// other events of the command carry.
type CmdStartBody struct {
	Argv []string `json:"argv"` // the command and its arguments
	Cwd  string   `json:"cwd"`  // working directory inside the sandbox
	// Env lists the NAMES of the environment variables, sorted; never values. The writer
	// strips anything from "=" on, should a caller pass NAME=value.
	Env []string `json:"env"`
}

// CmdEndBody is the body of cmd.end.
type CmdEndBody struct {
	ExitCode   int    `json:"exit_code"`        // the command's exit status (128+n when killed by signal n)
	Signal     string `json:"signal,omitempty"` // the signal that killed it, such as "SIGKILL"
	DurationMS int64  `json:"duration_ms"`      // wall time from start to exit
	Stdout     Output `json:"stdout"`
	Stderr     Output `json:"stderr"`
}

// Output summarises one output stream of a command (audit.Capture produces it).
type Output struct {
	Bytes  int64  `json:"bytes"`  // total bytes written
	SHA256 string `json:"sha256"` // hex digest of all of them
	// Head is the first bytes (at most the capture limit, cut at a UTF-8 boundary and
	// before any partial secret), redacted like every logged byte.
	Head      string `json:"head"`
	Truncated bool   `json:"truncated,omitempty"` // Head is shorter than the stream
}

// Reasons a run ended, for [RunEndBody.Reason].
const (
	ReasonExited    = "exited"    // the command exited by itself; ExitCode is its status
	ReasonTimeout   = "timeout"   // the timeout killed it (exit code 124)
	ReasonMonitor   = "monitor"   // the syscall monitor stopped it (exit code 137)
	ReasonSignal    = "signal"    // cordon was interrupted and stopped the run
	ReasonError     = "error"     // cordon could not run it or failed during the run (125)
	ReasonAuditFail = "audit"     // the audit log failed, the run was stopped (fail closed)
	ReasonCanceled  = "cancelled" // the caller cancelled the run
)

// RunEndBody is the body of run.end, the sealing last line of a finished run.
type RunEndBody struct {
	ExitCode int    `json:"exit_code"`        // what cordon exited with
	Reason   string `json:"reason"`           // one of the Reason constants
	Detail   string `json:"detail,omitempty"` // a one-line explanation, for errors
	Commands int    `json:"commands"`         // number of cmd.start lines (set by the writer)
	Dropped  int64  `json:"dropped"`          // events emitted after Close began (set by the writer)
	// Staged is set when the run left its changes staged (cordon run --stage): the
	// lines after this one (stage.apply, stage.discard) say what became of them, and
	// until one says nothing is left its stage waits in the run's directory.
	Staged bool `json:"staged,omitempty"`
}
