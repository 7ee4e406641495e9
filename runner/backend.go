package runner

import (
	"context"
	"io"
	"os"

	"github.com/cordonhq/cordon/contract"
)

// Backend builds sandboxes with one mechanism (Bubblewrap, Docker, containerd, ...).
type Backend interface {
	// Name is the backend's name as used by --backend.
	Name() string
	// Check reports why the backend cannot run here (wrapping errdefs.ErrUnavailable),
	// with a hint to fix it, or nil.
	Check(ctx context.Context) error
	// Start builds a sandbox for plan. The sandbox holds resources until Close.
	Start(ctx context.Context, plan *contract.Plan, host Host) (Sandbox, error)
}

// Host is what the runner prepared on the host for a sandbox.
type Host struct {
	RunID  string
	RunDir string // private to this run, never inside the workspace, mode 0700
	// Init is the path of cordon's own static binary, run as process 1 inside.
	Init string
	// MaskFile and MaskDir are empty, mode-0000 entries in RunDir that backends mount
	// over hidden paths.
	MaskFile, MaskDir string
	// EgressSocket is the unix socket of the run's egress proxy. Backends make it
	// reachable inside and have process 1 bridge BridgeAddr to it.
	EgressSocket string
	// ControlSocket, in a session, is the unix (SOCK_SEQPACKET) socket process 1 dials to
	// take commands; backends make it reachable at [ControlPath].
	ControlSocket string
	// SpillDir, in a session, holds the whole output of commands whose output was cut;
	// backends mount it read-only at [SpillPath].
	SpillDir string
	// GateSocket, when the contract has gates, is the socket `cordon gate NAME` asks on;
	// backends make it reachable at [GatePath] and put Init at [GateBinDir]/cordon.
	GateSocket string
	// Env is the sandbox environment: the plan's, plus what run-time services add.
	Env []string
	// SecretFiles are credentials delivered as files: backends put each at
	// /run/cordon/secrets/NAME (mode 0400) without writing the value to a host disk.
	SecretFiles []SecretFile
}

// SecretFile is one credential delivered as a file.
type SecretFile struct {
	Name  string
	Value string
}

// Process is one command to run in a sandbox.
type Process struct {
	Argv   []string
	Dir    string // working directory; "" means the plan's workdir
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Cgroup, when set, is the open directory of the cgroup the command is to start in
	// (a session's command cgroup; process 1 clones it straight into it).
	Cgroup *os.File
	// Serve, when set, starts a session's process 1 instead of a command: it runs no
	// command of its own but dials [Host.ControlSocket] and presents Serve as its token.
	// Argv is then empty and Exec returns when the session ends.
	Serve string
}

// CommandCgroups is implemented by sandboxes that can give each command of a session a
// cgroup of its own below the sandbox's: a timeout then kills everything the command
// started, setsid or not, and the monitor's events name the command exactly.
type CommandCgroups interface {
	// CommandCgroup creates the cgroup name; nil and no error when this sandbox has no
	// cgroup of its own to put it in.
	CommandCgroup(name string) (*CommandCgroup, error)
}

// CommandCgroup is one command's cgroup.
type CommandCgroup struct {
	ID     uint64   // its cgroup v2 id, as the monitor reports it
	Dir    *os.File // open directory, for CLONE_INTO_CGROUP
	Kill   func() error
	Empty  func() bool
	Rmdir  func() error // removes it when empty; fails (EBUSY) otherwise
	Remove func() error // kills what is left, then removes it
}

// Paths inside every sandbox.
const (
	ControlPath = "/run/cordon/control.sock" // a session's control socket
	SpillPath   = "/run/cordon/spill"        // a session's spill files
)

// Sandbox is a running or ready sandbox.
type Sandbox interface {
	// Exec runs p to completion and returns its exit status (128+n when a signal n
	// ended it). When ctx ends first, Exec kills everything p started, waits for it to
	// be gone, and returns ctx.Err().
	Exec(ctx context.Context, p Process) (int, error)
	// Close releases everything the sandbox holds. It is idempotent.
	Close(ctx context.Context) error
}
