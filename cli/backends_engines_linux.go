//go:build linux && noengines

package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/cordonhq/cordon/internal/linux"
)

// This file is the `noengines` build of cordon (the `cordon` that `make build` lays
// out): it links no container engine client, so it starts in half the time, which is
// most of a warm `cordon exec`. Whatever needs Docker or containerd replaces this
// process with cordon-engines, the full build beside it, with the same arguments.

// enginesBinary is the full build's name, beside this binary.
const enginesBinary = "cordon-engines"

func containerBackends() []backendInfo {
	return []backendInfo{
		{name: "docker", reexec: true, needsImage: true},
		{name: "containerd", reexec: true, needsImage: true},
		{name: "kubernetes", reexec: true, named: true},
	}
}

// delegated reports whether cmd always needs the full build: it lists, explains,
// measures or collects every backend's objects, or it is the server (which serves
// sessions on every backend, and whose packages this build leaves out) or the MCP
// server (whose SDK's packages cost every start of cordon ~0.7 ms of init).
func delegated(cmd string) bool {
	switch cmd {
	case "gc", "backends", "explain", "doctor", "serve", "mcp":
		return true
	}
	return false
}

// delegate replaces this process with cordon-engines for cmd when cmd needs the
// engines; it returns only when cordon-engines cannot be run (false: carry on without
// the container backends, which then say why).
func delegate(cmd string) bool {
	if !delegated(cmd) {
		return false
	}
	_ = execEngines()
	return false
}

// execEngines replaces this process with cordon-engines and the same arguments (stdio,
// inherited descriptors and the pid stay). It returns only on failure.
func execEngines() error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding cordon-engines: %w", err)
	}
	bin := filepath.Join(filepath.Dir(self), enginesBinary)
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("this cordon was built without the container engines and %s is not beside it (make build installs both)", enginesBinary)
	}
	args := append([]string{bin}, os.Args[1:]...)
	return fmt.Errorf("running %s: %w", bin, linux.Exec(bin, args, os.Environ()))
}
