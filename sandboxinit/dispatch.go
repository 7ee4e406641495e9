package sandboxinit

import (
	"os"

	gatewire "github.com/cordonhq/cordon/gate/wire"
	"github.com/cordonhq/cordon/internal/groupwatch"
	"github.com/cordonhq/cordon/sandboxinit/fileop"
	"github.com/cordonhq/cordon/sandboxinit/wire"
)

// InitArg is the `internal` subcommand that is process 1: `internal init [--dir DIR]`.
const InitArg = "init"

// The `internal` subcommands of a Kubernetes Pod (podinit_linux.go, pod_linux.go):
// process 1 is `internal init --pod SOCKET`, the exec'd relay to its control socket
// `internal attach SOCKET`, and the init container's copy of the binary `internal
// install DEST`.
const (
	PodFlag = "--pod"
	// podInnerFlag makes `internal init` a Pod's inner init, which process 1 starts
	// in an empty network namespace (podnetns_linux.go).
	podInnerFlag = "--pod-inner"
	AttachArg    = "attach"
	InstallArg   = "install"
)

// Dispatch runs the helper that args name, when they name one: process 1 itself
// (`internal init`) or a helper it re-executes (`internal join-cgroup`, `internal
// posture`, the group watcher, `internal file` and `internal gate-request`: the MCP
// file and gate tools, run inside) or a Pod's (`internal init --pod`, `internal
// attach`, `internal install`, `internal podws`). Both binaries that can be process 1, cordon-init and
// cordon, dispatch through it, before they build anything else: these start on every
// run. ok is false when args name no helper.
func Dispatch(args []string) (code int, ok bool) {
	if len(args) < 2 || args[0] != "internal" {
		return 0, false
	}
	switch args[1] {
	case InitArg:
		if len(args) > 2 && args[2] == PodFlag {
			return PodInitMain(args[3:]), true
		}
		if len(args) > 2 && args[2] == podInnerFlag {
			return podInnerMain(args[3:]), true
		}
		return Main(), true
	case wire.JoinArg:
		return JoinMain(args[2:]), true
	case wire.PostureArg:
		return PostureMain(args[2:]), true
	case groupwatch.Arg:
		return groupwatch.Main(args[2:]), true
	case AttachArg:
		return AttachMain(args[2:]), true
	case InstallArg:
		return InstallMain(args[2:]), true
	case PodWorkspaceArg:
		return PodWorkspaceMain(args[2:]), true
	case fileop.Arg:
		return fileop.Main(args[2:], os.Stdin, os.Stdout), true
	case gatewire.RequestArg:
		return gatewire.GateMain(args[2:], os.Stdout, os.Stderr), true
	}
	return 0, false
}
