package linux

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// Queued is how many bytes wait unread in the pipe or socket c (FIONREAD).
func Queued(c syscall.Conn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	n := 0
	cerr := raw.Control(func(fd uintptr) { n, err = unix.IoctlGetInt(int(fd), unix.TIOCINQ) })
	if cerr != nil {
		return 0, cerr
	}
	return n, err
}
