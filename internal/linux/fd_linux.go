package linux

import (
	"strconv"

	"golang.org/x/sys/unix"
)

// OpenFIFOWriter opens the named pipe path for writing, non-blocking and
// close-on-exec, as a raw descriptor: with no reader it fails at once (ENXIO).
func OpenFIFOWriter(path string) (int, error) {
	return unix.Open(path, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
}

// WaitReaderGone blocks until the pipe whose write end is fd has no reader left. A
// pipe's write end reports POLLERR then; ppoll with no requested events reports only
// that (and POLLHUP).
func WaitReaderGone(fd int) error {
	pfd := []unix.PollFd{{Fd: int32(fd)}}
	for {
		_, err := unix.Ppoll(pfd, nil, nil)
		switch {
		case err == unix.EINTR:
		case err != nil:
			return err
		case pfd[0].Revents&(unix.POLLERR|unix.POLLHUP) != 0:
			return nil
		}
	}
}

// FDType is the file type bits of what descriptor fd refers to (st_mode & S_IFMT:
// S_IFIFO, S_IFSOCK, S_IFCHR, S_IFREG, S_IFDIR, ...).
func FDType(fd int) (uint32, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, err
	}
	return st.Mode & unix.S_IFMT, nil
}

// InheritedFDs lists the descriptors open beyond stdio that the process inherited
// across its exec, read from /proc/self/fd with raw system calls so that nothing of
// the Go runtime's poller is counted. A close-on-exec descriptor was opened since
// the exec, by this process's own runtime (Go keeps the cgroup CPU limit files open
// to follow GOMAXPROCS); what survived the exec has the flag clear.
func InheritedFDs() ([]int, error) {
	dir, err := unix.Open("/proc/self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dir)
	var names []string
	buf := make([]byte, 8192)
	for {
		n, err := unix.ReadDirent(dir, buf)
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			break
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
	var out []int
	for _, name := range names {
		fd, err := strconv.Atoi(name)
		if err != nil || fd <= 2 || fd == dir || closeOnExec(fd) {
			continue
		}
		out = append(out, fd)
	}
	return out, nil
}

func closeOnExec(fd int) bool {
	flags, _, e := unix.RawSyscall(unix.SYS_FCNTL, uintptr(fd), unix.F_GETFD, 0)
	return e == 0 && flags&unix.FD_CLOEXEC != 0
}
