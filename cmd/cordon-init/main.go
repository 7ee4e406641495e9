// Command cordon-init is cordon's process 1 inside a sandbox, built on its own so that
// it starts fast: it links only what process 1 needs (the self-check, the egress
// bridge, the reaper), not the container engine clients and the BPF loader that the
// cordon command carries. cordon mounts it read-only into every sandbox when it sits
// next to the cordon binary; otherwise cordon mounts itself and runs `internal init`.
package main

import (
	"os"

	"github.com/cordonhq/cordon/internal/pid1"
)

func main() { os.Exit(pid1.Main()) }
