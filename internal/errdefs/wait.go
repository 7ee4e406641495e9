package errdefs

import (
	"errors"
	"os/exec"
	"syscall"
)

// WaitCode is the shell's exit status for a process's wait status: the code it exited
// with, or 128+n when signal n killed it (with a core dump or not). It is the one place
// cordon maps a wait status to a code; what cordon itself decides (124 for its timeout,
// 125 when it could not run the command, 137 for the monitor) is decided where it
// happens, not here.
func WaitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// ProcessCode is the shell's exit status of a process whose wait ([exec.Cmd.Wait],
// [exec.Cmd.Run]) returned err: 0 for nil, [WaitCode] of the status an
// [*exec.ExitError] in err's chain carries. ok is false for any other error: the
// process was not waited for (it did not start, or its wait failed), and what that
// means is the caller's to say.
func ProcessCode(err error) (code int, ok bool) {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, true
	case errors.As(err, &ee):
		if ws, isWS := ee.Sys().(syscall.WaitStatus); isWS {
			return WaitCode(ws), true
		}
		return ee.ExitCode(), true
	}
	return 0, false
}
