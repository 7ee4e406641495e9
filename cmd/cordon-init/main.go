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

	gatewire "github.com/cordonhq/cordon/gate/wire"
	"github.com/cordonhq/cordon/sandboxinit"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "gate" {
		os.Exit(gatewire.GateMain(os.Args[2:], os.Stdout, os.Stderr))
	}
	if code, ok := sandboxinit.Dispatch(os.Args[1:]); ok {
		os.Exit(code)
	}
	os.Exit(sandboxinit.Main()) // process 1 started without arguments (bwrap)
}
