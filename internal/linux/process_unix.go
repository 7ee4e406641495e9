//go:build unix

package linux

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// Kill sends sig to process pid (sig 0 only asks whether it may be signalled). A pid
// that is not positive is refused (EINVAL): kill(0) reaches the caller's own process
// group and kill(-1) every process it may signal, and a pid read as 0 or -1 (a process
// in another pid namespace, a parse gone wrong) must never become either.
func Kill(pid int, sig syscall.Signal) error {
	if pid <= 0 {
		return syscall.EINVAL
	}
	return unix.Kill(pid, sig)
}

// KillNamespace SIGKILLs every other process of the caller's pid namespace. Only
// process 1 of a pid namespace reaches exactly those; anywhere else kill(-1) would reach
// every process of the caller's user on the host, so it is refused (EPERM).
func KillNamespace() error {
	if unix.Getpid() != 1 {
		return syscall.EPERM
	}
	return unix.Kill(-1, syscall.SIGKILL)
}

// KillGroup sends sig to every process of the process group pgid. A pgid that is not
// positive is refused (EINVAL): kill(0) and kill(-1) would reach the caller's own
// group or everything.
func KillGroup(pgid int, sig syscall.Signal) error {
	if pgid <= 0 {
		return syscall.EINVAL
	}
	return unix.Kill(-pgid, sig)
}

// Exec replaces the calling process with argv0 run with argv and env (execve). It
// returns only on failure.
func Exec(argv0 string, argv, env []string) error { return unix.Exec(argv0, argv, env) }

// Umask sets the process's file mode creation mask and returns the previous one.
func Umask(mask int) int { return unix.Umask(mask) }

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
