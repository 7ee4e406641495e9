// Package wire is the protocol between cordon on the host and its process 1 in a
// sandbox (package sandboxinit): the [Spec] the host hands it, the [Status] it reports
// after its self-check, the files protocol the container backends use in place of
// inherited descriptors, and the [Posture] a command measures from inside. The host's
// backends import this package, never the program itself.
package wire

import (
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/paths"
)

// File descriptors the host passes to pid1.
const (
	StatusFD = 3 // pid1 writes one JSON Status line, then closes it
	SpecFD   = 4 // the host writes one JSON Spec and closes it; EOF is the "go" signal
)

// Spec tells pid1 what to check and what to run.
type Spec struct {
	Argv []string `json:"argv"`
	Dir  string   `json:"dir"`
	// Writable are the only mount points allowed to be read-write, apart from the
	// kernel file systems /dev and /proc that every sandbox gets.
	Writable []string `json:"writable"`
	// Read are the paths a command may read and execute below (the Plan's read-only
	// binds; "/" for a container image) and Write those it may also write (the Plan's
	// writable paths: not the engines' masks and files, which Writable allows as
	// mounts). With /dev, /proc and /run/cordon they are the Landlock ruleset process
	// 1 confines every command to.
	Read  []string `json:"read"`
	Write []string `json:"write"`
	// Hide are paths below Read that commands may not open even so (the files
	// protocol's FIFOs and spec).
	Hide []string `json:"hide,omitempty"`
	// HostUID is the host uid the sandbox must run as: process 1 refuses to run
	// anything when its own uid maps to another one.
	HostUID int `json:"host_uid"`
	// Egress, when set, is the address (127.0.0.1:port) pid1 listens on for the
	// sandbox's proxy clients, in the sandbox's network namespace. pid1 hands the
	// listening socket to cordon in its hello on the control channel and keeps no copy:
	// cordon's egress proxy accepts on it directly.
	Egress string `json:"egress,omitempty"`
	// Gate, when set, is the path of the unix socket a Kubernetes Pod's process 1
	// listens on for `cordon gate NAME` (the Pod's gate socket, which commands reach
	// through the link at paths.SandboxGate), before any command exists. It hands the
	// listener over with its status, as it does the egress listener, and keeps no copy.
	// The other backends serve the gate socket on the host and mount it.
	Gate string `json:"gate,omitempty"`
	// Control, when set, is the host's control socket, which pid1 dials before it
	// reports and before any command exists, and the token that proves it. pid1 waits
	// for the host's ready there (the host has the egress listener and checked it).
	Control *Control `json:"control,omitempty"`
	// Barrier (a one-command run with Control only) makes pid1 load the barrier
	// filter (internal/seccomp.Barrier) beside the main one, with a listener, on the
	// thread that forks the command, and hand the listener over in its hello, after
	// the egress listener, keeping no copy: the command's calls that may change a file
	// wait until the host lets them continue (once it has read the workspace's
	// baseline). pid1 fails rather than run the command without it.
	Barrier bool `json:"barrier,omitempty"`
	// Serve makes pid1 run no command of its own: it runs the commands the host sends
	// on Control (a session), until the host hangs up.
	Serve bool `json:"serve,omitempty"`
	// A Kubernetes Pod's process 1 (`internal init --pod`) is sent its spec on the
	// control channel it listens on, so the spec may carry what the files protocol's
	// payload carries elsewhere: Env, the commands' environment, replaces the one the
	// kubelet gave process 1 (which names the cluster's API server).
	Env []string `json:"env,omitempty"`
	// Files are a Pod's credential files, which process 1 writes into FilesDir (the
	// Pod's private memory volume at paths.SandboxSecrets) before any command runs,
	// as the files protocol's payload does elsewhere: never in the Pod's spec, never
	// in a Secret, gone with the Pod.
	FilesDir string `json:"files_dir,omitempty"`
	Files    []File `json:"files,omitempty"`
	// Trace asks pid1 for the times of its start-up in its Status (cordon run --trace):
	// it cannot write the host's trace file itself.
	Trace bool `json:"trace,omitempty"`
}

// Times are when pid1 reached each step of its start-up, wall clock in nanoseconds
// since the Unix epoch (the host's clock: a sandbox shares it).
type Times struct {
	Start   int64 `json:"start"`   // the kernel started the process (10 ms resolution)
	Main    int64 `json:"main"`    // its Go code began
	Spec    int64 `json:"spec"`    // it had the host's Spec
	Checked int64 `json:"checked"` // the self-check passed and the confinement was built
	Dialed  int64 `json:"dialed"`  // it had handed over on the control channel (0: none)
}

// Control is where pid1 dials the host and the token that proves it.
type Control struct {
	Socket string `json:"socket"`
	Token  string `json:"token"`
}

// Status is pid1's report after the self-check.
type Status struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"` // why the sandbox failed its self-check
	Times *Times `json:"times,omitempty"` // with Spec.Trace: pid1's start-up
}

// Exit codes pid1 uses for itself, as shells do.
const (
	ExitNotFound      = 127                   // the command does not exist
	ExitNotExecutable = 126                   // it exists but cannot be executed
	ExitSelfCheck     = errdefs.ExitCannotRun // the sandbox failed its self-check; the command never ran
)

// JoinArg is the `internal` subcommand a command starts through when it could not
// be cloned straight into its cgroup (container engines' seccomp profiles refuse
// clone3, and so CLONE_INTO_CGROUP): `internal join-cgroup PATH ARGV...` with the
// cgroup's cgroup.procs open as fd 3 moves itself there and then becomes the command.
const JoinArg = "join-cgroup"

// Confine is what a command is confined to.
type Confine struct {
	Read  []string `json:"read"`
	Write []string `json:"write"`
	List  []string `json:"list,omitempty"` // listable only
	// Hide are paths below Read that commands may not open even so (the files
	// protocol's FIFOs and spec).
	Hide []string `json:"hide,omitempty"`
	// Landlock is false only where the kernel has none (the self-check says so).
	Landlock bool `json:"landlock"`
}

// The files protocol's entries (files_linux.go).
const (
	DirSpec   = paths.InitSpec
	DirEnv    = paths.InitEnv
	DirStatus = paths.InitStatus
	DirFlag   = "--dir"
)

// File is one credential file: Name is a plain file name.
type File struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}
