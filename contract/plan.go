package contract

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// PlanVersion versions the JSON form of a Plan (`cordon explain --json`).
const PlanVersion = 1

// Access is what the sandbox may do with a path. The zero value is Hidden: a path no
// rule grants is not visible.
type Access int

// Access levels, from least to most.
const (
	Hidden Access = iota
	ReadOnly
	ReadWrite
)

func (a Access) String() string {
	switch a {
	case Hidden:
		return "hidden"
	case ReadOnly:
		return "ro"
	case ReadWrite:
		return "rw"
	}
	return fmt.Sprintf("Access(%d)", int(a))
}

// MarshalText implements encoding.TextMarshaler.
func (a Access) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// MountType says what backs a mount.
type MountType int

// Mount types.
const (
	// Bind shows the host path Source at Path.
	Bind MountType = iota
	// Tmpfs is an empty, private, writable file system that vanishes with the run.
	Tmpfs
	// Mask hides whatever is at Path (Access is Hidden).
	Mask
)

func (t MountType) String() string {
	switch t {
	case Bind:
		return "bind"
	case Tmpfs:
		return "tmpfs"
	case Mask:
		return "mask"
	}
	return fmt.Sprintf("MountType(%d)", int(t))
}

// MarshalText implements encoding.TextMarshaler.
func (t MountType) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// Placeholder says what the runner must create on the host before the run so that a
// denied path that does not exist yet is still enforced (the sandbox cannot create it),
// and remove after the run.
type Placeholder int

// Placeholder kinds.
const (
	NoPlaceholder Placeholder = iota
	PlaceholderFile
	PlaceholderDir
	// PlaceholderParent is a missing directory between a writable mount and a denied
	// path below it: made before the placeholder, bound on itself (pinned, so that the
	// sandbox cannot rename it away and make the denied path afresh), and removed after
	// the run only while empty.
	PlaceholderParent
)

// MarshalText implements encoding.TextMarshaler.
func (p Placeholder) MarshalText() ([]byte, error) {
	return []byte([...]string{"", "file", "dir", "parent"}[p]), nil
}

// Mount is one entry of the sandbox's file system view. Paths are absolute and
// symlink-resolved on the host; the sandbox sees Source at Path (they are equal for
// binds: the sandbox sees host paths at their host locations).
type Mount struct {
	Path   string    `json:"path"`
	Type   MountType `json:"type"`
	Access Access    `json:"access"`
	// Dir is true when the path is (or will be created as) a directory.
	Dir bool `json:"dir"`
	// Create is set when the path does not exist on the host yet.
	Create Placeholder `json:"create,omitempty"`
	// Content is what a placeholder file holds ("" for most: empty).
	Content string `json:"content,omitempty"`
	// Why names the contract rule or default that produced this mount.
	Why string `json:"why"`
}

// Link is a symbolic link the sandbox needs to mirror the host (merged-/usr systems
// have /bin -> usr/bin).
type Link struct {
	Path   string `json:"path"`
	Target string `json:"target"`
}

// EnvSource says where a sandbox variable's value comes from.
type EnvSource string

// Env sources.
const (
	EnvDefault EnvSource = "default"
	EnvPass    EnvSource = "pass"
	EnvSet     EnvSource = "set"
)

// PlanEnv is one variable of the sandbox environment, which starts empty.
type PlanEnv struct {
	Name   string    `json:"name"`
	Value  string    `json:"-"`
	Source EnvSource `json:"source"`
}

// Plan is a compiled contract: everything a backend and the run-time services need,
// resolved and checked. It is a pure value; backends only translate it.
type Plan struct {
	Version        int    `json:"version"`
	Name           string `json:"name,omitempty"`
	ContractFile   string `json:"contract_file"` // "" for the built-in default
	ContractDigest string `json:"contract_digest"`
	Workspace      string `json:"workspace"`
	Workdir        string `json:"workdir"`
	Home           string `json:"home"`
	Image          string `json:"image,omitempty"`
	Pull           string `json:"pull"`

	Mounts []Mount `json:"mounts"` // ordered: a parent before what is mounted inside it
	// Git is filesystem.git: GitReadOnly or GitCommit (the workspace's .git is then
	// writable but for gitPinned, and its changes belong in the log).
	Git   string `json:"git"`
	Links []Link `json:"links"`

	Env         []PlanEnv      `json:"env"`
	Egress      []EgressRule   `json:"egress"` // network.allow, compiled once
	Credentials []Credential   `json:"credentials"`
	Monitor     MonitorPlan    `json:"monitor"`
	Timeout     Duration       `json:"timeout"`
	Deny        []DenyPattern  `json:"deny"`
	Limits      LimitsPlan     `json:"limits"`
	Widenings   []WideningPlan `json:"widenings"`
	// Gates are the operations the sandbox may ask a person for (package gate). The
	// credentials they use (deliver: gate) are in their Gate.Credential, not in
	// Credentials, which the runner issues at start.
	Gates []Gate `json:"gates"`
	// Notes are what the compiler left out and why, for check and explain to say
	// (a .git pointer to a directory the contract does not show).
	Notes []string `json:"notes,omitempty"`
}

// MonitorPlan is the compiled monitor section.
type MonitorPlan struct {
	Mode        MonitorMode `json:"mode"`
	OnViolation OnViolation `json:"on_violation"`
	Exec        []string    `json:"exec"`
}

// MonitorMode is monitor.mode.
type MonitorMode string

// Monitor modes.
const (
	MonitorOff        MonitorMode = "off"         // no monitor
	MonitorBestEffort MonitorMode = "best-effort" // a monitor that cannot load is a warning
	MonitorRequired   MonitorMode = "required"    // a monitor that cannot load refuses the run
)

func (m MonitorMode) String() string { return string(m) }

// OnViolation is monitor.on_violation.
type OnViolation string

// What a violation does.
const (
	ViolationAlert OnViolation = "alert" // logged and said
	ViolationKill  OnViolation = "kill"  // and the run is killed
)

func (v OnViolation) String() string { return string(v) }

// LimitsPlan are the run's resource limits, defaults filled in; zero means unlimited,
// except in Diff, which holds the bounds in force.
type LimitsPlan struct {
	Memory int64   `json:"memory_bytes"` // zero: unlimited
	Pids   int64   `json:"pids"`         // zero: unlimited
	CPU    float64 `json:"cpu"`          // zero: unlimited
	// Tmpfs is the size of each private tmpfs (/tmp, $HOME, /dev/shm, ...): the
	// memory limit, so no one of them can take more than the run may; zero is the
	// kernel's default (half the host's memory).
	Tmpfs int64 `json:"tmpfs_bytes"`
	// Defaulted names the limits the contract left to cordon's defaults.
	Defaulted []string       `json:"defaulted,omitempty"`
	Diff      DiffLimitsPlan `json:"diff"`
}

// DiffLimitsPlan are the bounds on what cordon does on the host about the
// workspace's changes (see [DiffLimits]), every one set.
type DiffLimitsPlan struct {
	Entries   int64         `json:"entries"`
	HashFile  int64         `json:"hash_file_bytes"`
	HashTotal int64         `json:"hash_total_bytes"`
	Patch     int64         `json:"patch_bytes"`
	PatchRun  int64         `json:"patch_run_bytes"`
	Time      time.Duration `json:"time_ns"`
}

// DefaultDiffLimits are the bounds of limits.diff that a contract does not set.
var DefaultDiffLimits = DiffLimitsPlan{
	Entries:   100_000,
	HashFile:  1 << 30,
	HashTotal: 4 << 30,
	Patch:     16 << 20,
	PatchRun:  256 << 20,
	Time:      60 * time.Second,
}

// diffLimits is l with DefaultDiffLimits for what it leaves unset.
func diffLimits(l DiffLimits) DiffLimitsPlan {
	d := DefaultDiffLimits
	return DiffLimitsPlan{
		Entries:   cmp.Or(l.Entries, d.Entries),
		HashFile:  cmp.Or(l.HashFile, d.HashFile),
		HashTotal: cmp.Or(l.HashTotal, d.HashTotal),
		Patch:     cmp.Or(l.Patch, d.Patch),
		PatchRun:  cmp.Or(l.PatchRun, d.PatchRun),
		Time:      cmp.Or(l.Time, d.Time),
	}
}

// Any reports whether a limit is set.
func (l LimitsPlan) Any() bool { return l.Memory > 0 || l.Pids > 0 || l.CPU > 0 }

// Asked reports whether the contract itself set a limit (not only the defaults).
func (l LimitsPlan) Asked() bool {
	return (l.Memory > 0 && !slices.Contains(l.Defaulted, "memory")) ||
		(l.Pids > 0 && !slices.Contains(l.Defaulted, "pids")) || l.CPU > 0
}

// WideningPlan is a deliberate exception to a mandatory denial, kept in the Plan so
// that `cordon check` and `cordon explain` show it.
type WideningPlan struct {
	Path   string `json:"path"`
	Access Access `json:"access"`
	Why    string `json:"why"`
	Where  string `json:"where"` // FILE:LINE:COL
}

// Duration marshals as a Go duration string.
type Duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// String formats the duration like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }

// EnvValue returns the value of a sandbox variable.
func (p *Plan) EnvValue(name string) (string, bool) {
	for _, e := range p.Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

// Environ returns the sandbox environment as NAME=value strings.
func (p *Plan) Environ() []string {
	out := make([]string, len(p.Env))
	for i, e := range p.Env {
		out[i] = e.Name + "=" + e.Value
	}
	return out
}

// Readable returns the host paths the sandbox may only read (read-only binds).
func (p *Plan) Readable() []string {
	var out []string
	for _, m := range p.Mounts {
		if m.Type == Bind && m.Access == ReadOnly {
			out = append(out, m.Path)
		}
	}
	return out
}

// Writable returns the paths the sandbox may write (binds and tmpfs).
func (p *Plan) Writable() []string {
	var out []string
	for _, m := range p.Mounts {
		if m.Access == ReadWrite {
			out = append(out, m.Path)
		}
	}
	return out
}

// HostWritable returns the host paths the sandbox can write: the workspace and every
// read-write bind (a tmpfs is the sandbox's own, not the host's). Nothing the host
// executes may lie in one of them.
func (p *Plan) HostWritable() []string {
	var out []string
	if p.Workspace != "" {
		out = append(out, p.Workspace)
	}
	for _, m := range p.Mounts {
		if m.Type == Bind && m.Access == ReadWrite {
			out = append(out, m.Path)
		}
	}
	return out
}
