// Package paths names where cordon keeps its host-side state, for the packages that
// must agree on it without importing each other (the runner, the session client, gc).
package paths

import (
	"os"
	"path/filepath"
	"strconv"
)

// RunRootEnv names the variable that, when set, is the run root instead of the default:
// side-by-side installations and tests keep their runs, sessions, gate sockets and gc
// apart with it. A relative value is taken from the current directory. The run root is
// checked as before: it must be owned by the user and writable by no one else.
const RunRootEnv = "CORDON_RUN_ROOT"

// RunRoot is where run directories live: $CORDON_RUN_ROOT when set, /run/cordon/runs for
// root, else under $XDG_RUNTIME_DIR or the temporary directory, private to the user.
func RunRoot() string {
	if d := os.Getenv(RunRootEnv); d != "" {
		if abs, err := filepath.Abs(d); err == nil {
			return abs
		}
		return d
	}
	if os.Geteuid() == 0 {
		return "/run/cordon/runs"
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "cordon", "runs")
	}
	return filepath.Join(os.TempDir(), "cordon-"+strconv.Itoa(os.Geteuid()), "runs")
}

// Sessions is where session supervisors publish their sockets and descriptions.
func Sessions(runRoot string) string { return filepath.Join(runRoot, "sessions") }
