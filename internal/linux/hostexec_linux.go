package linux

import (
	"os"

	"golang.org/x/sys/unix"
)

// The calls below let internal/hostexec resolve a program the host will run one name
// at a time from the root, never following a symbolic link on its own, and hold the
// file it checked open so that what runs is what was checked.

// OpenRootPath opens / as an O_PATH descriptor, the start of a resolution.
func OpenRootPath() (int, error) {
	fd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: "/", Err: err}
	}
	return fd, nil
}

// OpenPathAt opens the entry name of the directory dirfd as an O_PATH descriptor,
// without following it if it is a symbolic link.
func OpenPathAt(dirfd int, name string) (int, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "openat", Path: name, Err: err}
	}
	return fd, nil
}

// OpenProgramAt opens the file name of the directory dirfd for reading (to read its
// #! line and ELF headers through the descriptor that is then executed), without
// following a symbolic link and without blocking (a FIFO opens at once; the caller
// refuses anything but a regular file).
func OpenProgramAt(dirfd int, name string) (*os.File, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "openat", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), name), nil
}
