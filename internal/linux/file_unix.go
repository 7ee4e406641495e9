//go:build unix

package linux

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Close closes the raw descriptor fd.
func Close(fd int) error { return unix.Close(fd) }

// Mkfifo creates the named pipe path with mode (less the umask).
func Mkfifo(path string, mode uint32) error { return unix.Mkfifo(path, mode) }

// Owner returns the uid and gid that own path.
func Owner(path string) (uid, gid int, err error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, 0, fmt.Errorf("stat %s: %w", path, err)
	}
	return int(st.Uid), int(st.Gid), nil
}

// CloseOnExec marks the descriptor fd close-on-exec: one a process inherited (an
// ExtraFiles pipe) that its own children must not.
func CloseOnExec(fd int) { unix.CloseOnExec(fd) }

// Pollable returns f (a descriptor received from another process) as a non-blocking
// duplicate in Go's poller, closing f: closing the duplicate then ends a read that
// waits on it. Where that cannot be done (or f is a regular file, which is never
// pollable) it returns f itself.
func Pollable(f *os.File) *os.File {
	rc, err := f.SyscallConn()
	if err != nil {
		return f
	}
	nfd := -1
	_ = rc.Control(func(fd uintptr) {
		if d, err := unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0); err == nil {
			nfd = d
		}
	})
	if nfd < 0 {
		return f
	}
	if unix.SetNonblock(nfd, true) != nil {
		unix.Close(nfd)
		return f
	}
	f.Close()
	return os.NewFile(uintptr(nfd), f.Name())
}

// TryLock takes an exclusive flock(2) on f without waiting: false when another open
// file holds it. Closing f releases it.
func TryLock(f *os.File) (bool, error) { return tryFlock(f, unix.LOCK_EX) }

// TryLockShared takes a shared flock(2) on f without waiting: false when another open
// file holds it exclusively. Closing f releases it.
func TryLockShared(f *os.File) (bool, error) { return tryFlock(f, unix.LOCK_SH) }

func tryFlock(f *os.File, how int) (bool, error) {
	err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.EWOULDBLOCK):
		return false, nil
	}
	return false, err
}
