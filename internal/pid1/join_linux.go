package pid1

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// joinFD is the cgroup directory's descriptor in the trampoline.
const joinFD = 3

// JoinMain is `internal join-cgroup`. It returns only on failure, with the status the
// command's failure to start gets: the command never runs outside its cgroup.
func JoinMain(args []string) int {
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "cordon: internal join-cgroup: for cordon's own use only")
		return ExitNotExecutable
	}
	fd, err := syscall.Openat(joinFD, "cgroup.procs", syscall.O_WRONLY|syscall.O_CLOEXEC, 0)
	if err == nil {
		_, err = syscall.Write(fd, []byte("0")) // "0": the writing process
		syscall.Close(fd)
	}
	syscall.Close(joinFD)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cordon: %s: joining the command's cgroup: %v\n", args[1], err)
		return ExitNotExecutable
	}
	err = syscall.Exec(args[0], args[1:], os.Environ())
	fmt.Fprintf(os.Stderr, "cordon: %s: %v\n", args[1], err)
	if errors.Is(err, syscall.ENOENT) {
		return ExitNotFound
	}
	return ExitNotExecutable
}
