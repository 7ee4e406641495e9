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

// renameExcl renames from to to in the directory dfd, never over an entry at to
// (EEXIST; RENAME_EXCL).
func renameExcl(dfd int, from, to string) error {
	return unix.RenameatxNp(dfd, from, dfd, to, unix.RENAME_EXCL)
}
