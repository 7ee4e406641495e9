//go:build unix

package linux

import (
	"fmt"

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
