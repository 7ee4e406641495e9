package linux

import (
	"errors"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// openParentNoLinks opens the directory holding p, following no symbolic link on the
// way (each component is opened with O_NOFOLLOW), creating the missing ones when
// mkdir is set. Linux does this in one openat2 call (stage_linux.go).
func openParentNoLinks(p string, mkdir bool) (int, error) {
	dir := filepath.Clean(filepath.Dir(p))
	if !filepath.IsAbs(dir) {
		return -1, errors.New("openParentNoLinks: want an absolute path")
	}
	fd, err := unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	for _, c := range strings.Split(strings.TrimPrefix(dir, "/"), "/") {
		if c == "" {
			continue
		}
		next, err := unix.Openat(fd, c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) && mkdir {
			if err = unix.Mkdirat(fd, c, 0o755); err == nil || errors.Is(err, unix.EEXIST) {
				next, err = unix.Openat(fd, c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			}
		}
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

// RenameNoLinksFirst renames p, in its directory, to the first of names no entry
// there has, following no symbolic link on the way to it, and returns the name it
// took (see the Linux version).
func RenameNoLinksFirst(p string, names []string) (string, error) {
	pfd, err := openParentNoLinks(p, false)
	if err != nil {
		return "", err
	}
	defer unix.Close(pfd)
	err = unix.EEXIST
	for _, n := range names {
		err = unix.RenameatxNp(pfd, filepath.Base(p), pfd, n, unix.RENAME_EXCL)
		if err == nil {
			return n, nil
		}
		if !errors.Is(err, unix.EEXIST) {
			return "", err
		}
	}
	return "", err
}

// RenameNoLinks renames p to newName in the same directory, following no symbolic
// link on the way to it, and never over an existing newName.
func RenameNoLinks(p, newName string) error {
	pfd, err := openParentNoLinks(p, false)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	return unix.RenameatxNp(pfd, filepath.Base(p), pfd, newName, unix.RENAME_EXCL)
}
