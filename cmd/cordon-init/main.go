// Command cordon-init is cordon's process 1 inside a sandbox, built on its own so that
// it starts fast: it links only what process 1 needs (the self-check, the egress
// listener it hands over, the reaper, the control channel), not the container engine clients
// and the BPF loader that the cordon command carries. cordon mounts it read-only into
// every sandbox when it sits next to the cordon binary; otherwise cordon mounts itself
// and runs `internal init`.
//
// In a sandbox whose contract has gates, the same binary is on PATH as `cordon`, where
// `cordon gate NAME` asks a person to approve the gate's operation.
package main

import (
	"os"

	"github.com/cordonhq/cordon/gate/wire"
	"github.com/cordonhq/cordon/internal/groupwatch"
	"github.com/cordonhq/cordon/internal/pid1"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "gate" {
		os.Exit(wire.GateMain(os.Args[2:], os.Stdout, os.Stderr))
	}
	if len(os.Args) > 2 && os.Args[1] == "internal" && os.Args[2] == pid1.JoinArg {
		os.Exit(pid1.JoinMain(os.Args[3:]))
	}
	if len(os.Args) > 2 && os.Args[1] == "internal" && os.Args[2] == pid1.PostureArg {
		os.Exit(pid1.PostureMain(os.Args[3:]))
	}
	if len(os.Args) > 2 && os.Args[1] == "internal" && os.Args[2] == groupwatch.Arg {
		os.Exit(groupwatch.Main(os.Args[3:]))
	}
	os.Exit(pid1.Main())
}
