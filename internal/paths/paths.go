// Package paths names where cordon keeps its host-side state, for the packages that
// must agree on it without importing each other (the runner, the session client, gc).
package paths

import (
	"os"
	"path/filepath"
	"strconv"
)

// RunRoot is where run directories live: /run/cordon/runs for root, else under
// $XDG_RUNTIME_DIR or the temporary directory, private to the user.
func RunRoot() string {
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
