//go:build !unix

package gate

import "os/exec"

// setProcessGroup: no process groups here; cancellation kills the process alone.
func setProcessGroup(*exec.Cmd) {}
