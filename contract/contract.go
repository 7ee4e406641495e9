package contract

import (
	"time"

	"github.com/cordonhq/cordon/internal/strictyaml"
)

// SchemaVersion is the only contract version this cordon understands.
const SchemaVersion = 1

// Pos is a position in a contract file, 1-based. The zero Pos means "not from a file"
// (a default or the built-in contract).
type Pos = strictyaml.Pos

// Str is a string value together with where it was written.
type Str struct {
	Value string
	Pos   Pos
}

// Contract is a decoded, not yet validated contract. Unset fields mean defaults, which
// [Compile] applies; an unset access field never means "more access".
type Contract struct {
	File        string // path of the contract file; "" for the built-in default
	Source      []byte // the file's bytes, for the digest; nil for the built-in default
	Version     int
	VersionPos  Pos
	Name        string
	Workspace   Str
	Image       string
	Pull        Str // "never" (default) or "missing"; container backends only
	Filesystem  Filesystem
	Network     Network
	Env         Env
	Credentials []Credential
	Monitor     Monitor
	Commands    Commands
	Limits      Limits
	Gates       []GateSpec
}

// Filesystem is the contract's first clause: what the run may write and read.
type Filesystem struct {
	Writable  []Str // nil: default ["."]
	Readable  []Str // nil: default ["@system"]
	DenyWrite []Str
	DenyRead  []Str
	// Git says what the sandbox may do to the workspace's own .git: GitReadOnly (the
	// default, "") or GitCommit.
	Git Str
	// Widen lists deliberate exceptions to the mandatory denials (credential stores,
	// container engine sockets, kernel interfaces). Each needs a why.
	Widen []Widening
	// set records which lists were written in the file, so that an explicit empty list
	// ("deny_write: []") is told apart from an absent one.
	set map[string]bool
}

// Widening makes a mandatorily denied path visible. It is reported by `cordon check`.
type Widening struct {
	Path   Str
	Access Access // ReadOnly or ReadWrite
	Why    string
	Pos    Pos
}

// Network is the contract's second clause: the egress allowlist.
type Network struct {
	Allow []NetRule
}

// NetRule allows egress to a host (exact or "*.suffix") or a CIDR, on some ports.
type NetRule struct {
	Host  string   `json:"host,omitempty"`
	CIDR  string   `json:"cidr,omitempty"`
	Ports []uint16 `json:"ports"`
	Why   string   `json:"why,omitempty"`
	Pos   Pos      `json:"pos"`
}

// Env says which variables the sandbox gets; it starts from nothing.
type Env struct {
	Pass []Str
	Set  []EnvVar // in file order
}

// EnvVar is one variable set by the contract.
type EnvVar struct {
	Name  string
	Value string
	Pos   Pos
}

// Credential is one task-scoped credential (enforced by the credentials issue).
type Credential struct {
	Name     string         `json:"name"`
	Provider string         `json:"provider"`
	TTL      time.Duration  `json:"ttl"`
	Scope    map[string]any `json:"scope,omitempty"`
	Deliver  Deliver        `json:"deliver"`
	Hosts    []string       `json:"hosts,omitempty"`
	Why      string         `json:"why,omitempty"`
	Pos      Pos            `json:"pos"`
}

// Monitor configures the eBPF syscall monitor (enforced by the monitor issue).
type Monitor struct {
	Mode        Str   // off (default) | best-effort | required
	OnViolation Str   // alert (default) | kill
	Exec        []Str // allowed executables: path globs or basenames
}

// Commands holds per-command rules.
type Commands struct {
	Timeout    time.Duration // zero: default 60s
	TimeoutPos Pos
	Deny       []Str // argv patterns refused before exec
}

// Limits are resource limits for the whole run. Zero means the default
// ([DefaultMemory], [DefaultPids]; no CPU limit); [Unlimited] means none.
type Limits struct {
	Memory int64   // bytes
	Pids   int64   // processes and threads
	CPU    float64 // CPUs
	Diff   DiffLimits
	Pos    Pos
}

// Unlimited is a limit the contract lifts (`unlimited`): a widening over the default.
const Unlimited = -1

// The default limits of a run whose contract sets none: one run's fork bomb, memory
// hog or tmpfs fill stops at them instead of taking the host. Every private tmpfs is
// sized to the memory limit, and what is written to one is charged to it as well.
const (
	DefaultMemory int64 = 4 << 30
	DefaultPids   int64 = 4096
)

// DiffLimits bound what cordon does on the host, in its own process, about what the
// sandbox left in the workspace (limits.diff): snapshot and diff, hashing, patch
// storage. Zero means the default (DefaultDiffLimits); there is no unlimited. Past a
// bound cordon stops and the fs.diff line records the gap.
type DiffLimits struct {
	Entries   int64         // entries recorded per snapshot
	HashFile  int64         // bytes hashed of one file
	HashTotal int64         // bytes hashed per snapshot
	Patch     int64         // bytes of patch per diff
	PatchRun  int64         // bytes of patch files stored per run
	Time      time.Duration // wall time of one snapshot and diff
}

// Error is one problem in a contract, located in its file; its Error() is one line,
// FILE:LINE:COL: message (a path in Msg, a workspace name the sandbox may have made,
// cannot start another line or drive the terminal). It is the strict YAML decoder's,
// so that a decoding problem and a compiling one are the same type.
type Error = strictyaml.Error

// Where formats a contract location as FILE:LINE:COL (FILE alone without a position;
// <built-in> for the built-in default contract, which has no file).
func Where(file string, p Pos) string { return strictyaml.Where(file, p) }
