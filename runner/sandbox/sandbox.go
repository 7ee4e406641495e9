// Package sandbox is the contract between the runner and its backends: what the runner
// prepares on the host for a sandbox ([Host]), the one call that builds it
// ([Backend.Start]), what a sandbox does ([Sandbox.Exec], [Sandbox.Close]) and the paths
// every sandbox has inside. Modelled on containerd's core/sandbox, it holds types and
// no policy, and it links neither the run-time services (egress proxy, credentials
// broker, gates, monitor) nor the runner: a backend imports this package, never the
// runner, and so only translates a plan into its mechanism.
package sandbox

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strconv"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/internal/secret"
)

// Backend builds sandboxes with one mechanism (Bubblewrap, Docker, containerd, ...).
//
// Every backend implements every method, what it cannot do included: "not supported"
// is an answer it gives ([ErrNoStage], false, a nil release), as containerd's
// sandbox.Controller does, never the absence of a method the runner probes for. A
// backend whose method is misnamed or mistyped then fails to compile rather than
// running without what the method provides.
type Backend interface {
	// Name is the backend's name as used by --backend.
	Name() string
	// Check reports why the backend cannot run here (wrapping errdefs.ErrUnavailable),
	// with a hint to fix it, or nil.
	Check(ctx context.Context) error
	// HostUID says, before Start, which host uid plan's sandbox runs as: uid when it is
	// fixed (the workspace owner's, cordon's own), or lease true when the sandbox needs
	// a host uid of its own (bwrap run by root for a root-owned workspace: the kernel
	// counts inotify instances, processes and message queue bytes per uid, so tenants
	// sharing one would share those limits). The runner then leases one from cordon's
	// range (package internal/uids) for the life of the run, records it in run.start
	// and the run's owner record, and passes it as [Host.UID]; the backend refuses a
	// Start that needs one and has none, never falling back to a shared uid. A backend
	// whose sandbox runs as the caller (seatbelt) answers 0, false, nil.
	HostUID(plan *contract.Plan) (uid int, lease bool, err error)
	// Warm begins, in the background, work Start needs that depends only on the plan
	// and the run's host uid, while the run's services are prepared (bwrap as root: the
	// idmap user namespace it stages root's files through). uid is the host uid leased
	// to the run ([Host.UID]), or 0. Warm returns at once; the next Start for the same
	// plan takes what it began; release, called when the run ends, drops it when no
	// Start did. The runner calls Warm right after Check and the lease of the run's
	// uid. A backend with nothing to begin returns a nil release.
	Warm(plan *contract.Plan, uid int) (release func())
	// CanStage says whether the backend can run a staged run ([Host.Stage]) here: nil,
	// or why not. A backend that never can answers an error that is [ErrNoStage]; the
	// runner refuses staged runs on it.
	CanStage() error
	// LoopbackEgress reports whether the backend's sandbox has no network namespace of
	// its own, so no process 1 listens on [ProxyAddr] in one (seatbelt on macOS): the
	// runner then serves the egress proxy on a per-run loopback TCP port instead
	// ([Host.EgressAddr]), which any local process can connect to, and requires a
	// per-run token of every client.
	LoopbackEgress() bool
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
	// EgressAddr, for a [Backend.LoopbackEgress] backend, is the loopback TCP address
	// (127.0.0.1:port) the run's egress proxy listens on; Env's proxy variables name
	// it with the run's token. Empty otherwise.
	EgressAddr string
	// ControlSocket is the unix socket (ctl.Network) process 1 dials, before it reports
	// and before any command exists, presenting ControlToken; backends make it reachable
	// at [ControlPath]. In a session process 1 takes its commands there. Where the
	// sandbox has a network namespace of its own (every backend but a
	// [Backend.LoopbackEgress] one), process 1 also listens on [ProxyAddr] inside it
	// and hands the listening socket over in its hello: the run's egress proxy accepts
	// on it directly. Empty for a one-command run of a [Backend.LoopbackEgress] backend.
	ControlSocket string
	ControlToken  string
	// ServeRelayed is for a sandbox whose connections to the run's services do not
	// arrive on sockets process 1 can hand over or the backend can mount (a Kubernetes
	// Pod's, relayed over its control stream): its backend gives the listener where a
	// service's connections arrive to that service here, once per service, before
	// process 1's hello. [RelayedEgress]: the connections to [ProxyAddr], for the run's
	// egress proxy; the hello then carries no descriptor (the runner refuses a hello
	// without the listener unless this was called, and one with a descriptor if it
	// was). [RelayedGate]: the connections to [GatePath], for the run's gate service;
	// only in a run with gates (GateSocket set), and then in place of a mount of
	// GateSocket.
	ServeRelayed func(Relayed, net.Listener) error
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
	// UID, when not 0, is the host uid (and gid) leased to this run for its sandbox to
	// run as ([Backend.HostUID]): no other live run has it.
	UID int
	// Stage, for a staged run, is where the workspace's writes go: the backend shows
	// the workspace as an overlay of Stage.Upper on the real workspace (read only), or
	// refuses the run. Nil for a direct run.
	Stage *Stage
}

// Relayed names a run's service whose sandbox side a backend relays
// ([Host.ServeRelayed]).
type Relayed int

// The relayed services.
const (
	RelayedEgress Relayed = iota + 1 // the egress proxy, at [ProxyAddr]
	RelayedGate                      // the gate service, at [GatePath]
)

func (s Relayed) String() string {
	switch s {
	case RelayedEgress:
		return "egress"
	case RelayedGate:
		return "gate"
	}
	return "Relayed(" + strconv.Itoa(int(s)) + ")"
}

// Stage is a staged run's overlay directories, on one file system, out of the
// sandbox's reach.
type Stage struct {
	Upper string // the change set: what the sandbox wrote
	Work  string // overlayfs' scratch directory, empty
}

// StageRoot is where, in the run directory, the container backends mount a staged
// run's overlay of the workspace for the engine to bind (engines bind host paths; bwrap
// keeps its overlay in a private mount namespace). gc detaches what a killed run left.
const StageRoot = "staged-workspace"

// ErrNoStage means a backend cannot run a staged run (its [Backend.CanStage] and its
// sandboxes' [Sandbox.StagedWorkspace] answer it).
var ErrNoStage = errors.New("staged runs are not implemented on this backend")

// SecretFile is one credential (or the run's CA bundle) delivered as a file. Value stays
// opaque up to delivery: the backend reveals it only to write it where the sandbox
// reads it, and a Host printed or logged shows no secret.
type SecretFile struct {
	Name  string
	Value secret.Value
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
	// Serve starts a session's process 1 instead of a command: it runs no command of
	// its own but takes them on [Host.ControlSocket]. Argv is then empty and Exec
	// returns when the session ends.
	Serve bool
	// Ready, when set, is what the command waits for. A sandbox that
	// [Sandbox.StartsEarly] builds itself (its namespaces, process 1 and process 1's
	// self-check) while the caller finishes what must be in place first, and calls
	// Ready once, before anything of the command can run: the command runs only if
	// it returns nil; an error ends Exec with that error, the sandbox killed. Other
	// sandboxes never call it (the caller then waits before Exec).
	Ready func(context.Context) error
	// Barrier asks a sandbox that implements [Barrier] for its barrier: process 1
	// loads the barrier filter on the thread that forks the command and hands its
	// listener over on [Host.ControlSocket], after the egress listener.
	Barrier bool
}

// Barrier is implemented by a sandbox whose process 1 can hold a one-command run's
// calls that may change a file until cordon lets them go on ([Process.Barrier]).
type Barrier interface {
	// Barrier reports whether it can.
	Barrier() bool
}

// Sandbox is a running or ready sandbox. As with [Backend], every sandbox implements
// every method, and says so when it cannot do what one asks.
type Sandbox interface {
	// Exec runs p to completion and returns its exit status (128+n when a signal n
	// ended it). When ctx ends first, Exec kills everything p started, waits for it to
	// be gone, and returns ctx.Err().
	Exec(ctx context.Context, p Process) (int, error)
	// Close releases everything the sandbox holds. It is idempotent.
	Close(ctx context.Context) error
	// StartsEarly reports whether Exec honours [Process.Ready]: it starts building the
	// sandbox at once and holds the command back until Ready returns.
	StartsEarly() bool
	// CgroupID is the cgroup v2 id of the sandbox (of its current container), which
	// the syscall monitor watches; 0 when it has none, with why when it can have none
	// (seatbelt: the monitor is eBPF, which macOS does not have).
	CgroupID() (uint64, error)
	// CommandCgroup gives a session's command a cgroup of its own below the sandbox's:
	// a timeout then kills everything the command started, setsid or not, and the
	// monitor's events name the command exactly. It returns nil and no error when the
	// sandbox has no cgroup of its own to put it in.
	CommandCgroup(name string) (*CommandCgroup, error)
	// StagedWorkspace gives cordon, in a staged session, the overlay the sandbox sees
	// as its workspace, mounted and live (an O_PATH directory, the caller's to close):
	// checkpoints read it and rollbacks write through it while the sandbox runs, and
	// each command's diff is taken of it. A sandbox that cannot be staged answers an
	// error that is [ErrNoStage].
	StagedWorkspace() (*os.File, error)
	// SyncWorkspace brings into the host's workspace what the sandbox's commands
	// changed in theirs, where they do not write the host's own (a Pod's volume on
	// its node): the runner calls it before it reads the workspace other than at a
	// command's end (a session command's baseline, the session's end), so that what a
	// background process wrote meanwhile is logged between commands, not lost or
	// counted as the next command's. What never reaches the host never happened there.
	// A sandbox whose commands write the host's workspace returns nil. last is the
	// session's end: nothing may be missed then, whatever it costs (a sandbox that
	// brings back only what it saw change reads the whole workspace).
	SyncWorkspace(ctx context.Context, last bool) error
	// SpillShown is where the sandbox sees a session's spill directory ([Host.SpillDir]):
	// [SpillPath] where it is mounted there, the host path where nothing is mounted
	// (seatbelt).
	SpillShown() string
}

// Paths inside every sandbox.
const (
	ControlPath = paths.SandboxControl // a session's control socket
	SpillPath   = paths.SandboxSpill   // a session's spill files
	// GatePath is the socket `cordon gate NAME` asks on, in a sandbox with gates, and
	// GateBinDir the directory (appended to PATH) holding that `cordon`, cordon's
	// process-1 binary.
	GatePath   = paths.SandboxGate
	GateBinDir = paths.SandboxGateBin
)

// ProxyAddr is where, inside every sandbox with a network namespace of its own, the
// run's egress proxy takes HTTP proxy, CONNECT and SOCKS5 clients: process 1 listens
// there and hands the listening socket to cordon (see [Host.ControlSocket]). The sandbox
// has its own network namespace, so the port is always free.
const ProxyAddr = "127.0.0.1:3128"
