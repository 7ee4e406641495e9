package linux

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// ForkExec starts path with argv as attr says (working directory, environment,
// descriptors, [syscall.SysProcAttr]) and returns its pid. x/sys/unix has no fork:
// this is the one place the syscall package's is used.
func ForkExec(path string, argv []string, attr *syscall.ProcAttr) (int, error) {
	return syscall.ForkExec(path, argv, attr)
}

// WaitAny waits for any child of the caller to change state (wait4(-1)), with
// options such as [syscall.WNOHANG], and returns its pid with its status in ws.
func WaitAny(ws *syscall.WaitStatus, options int) (int, error) {
	var st unix.WaitStatus
	pid, err := unix.Wait4(-1, &st, options, nil)
	*ws = syscall.WaitStatus(st)
	return pid, err
}
