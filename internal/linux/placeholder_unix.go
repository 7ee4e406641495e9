//go:build linux || darwin

package linux

import (
	"errors"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// MakePlaceholder creates the directory p, or the file p holding content, and its
// missing parents, following no symbolic link: a link planted on the way fails it
// (ELOOP) rather than create anything elsewhere. A file with content is world-readable
// (the tools that read it on the host may run as anyone); an empty one is 0600.
func MakePlaceholder(p string, dir bool, content string) error {
	pfd, err := openParentNoLinks(p, true)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	if dir {
		return unix.Mkdirat(pfd, filepath.Base(p), 0o700)
	}
	mode := uint32(0o600)
	if content != "" {
		mode = 0o644
	}
	fd, err := unix.Openat(pfd, filepath.Base(p), unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
	if err != nil {
		return err
	}
	if content != "" {
		if err := unix.Fchmod(fd, mode); err != nil { // past the umask
			unix.Close(fd)
			return err
		}
		if _, err := unix.Write(fd, []byte(content)); err != nil {
			unix.Close(fd)
			return err
		}
	}
	return unix.Close(fd)
}

// ErrNotPlaceholder means what is at a placeholder's path is no longer an empty file
// or directory: it is left in place.
var ErrNotPlaceholder = errors.New("no longer an empty placeholder")

// RemovePlaceholder removes p if it is still a regular file holding exactly content
// or an empty directory, following no symbolic link (one planted on the way, or at p,
// is left alone). A p that is gone is no error.
func RemovePlaceholder(p, content string) error {
	pfd, err := openParentNoLinks(p, false)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	name := filepath.Base(p)
	if err := unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		if st.Size != int64(len(content)) || !holds(pfd, name, content) {
			return ErrNotPlaceholder
		}
		err = unix.Unlinkat(pfd, name, 0)
	case unix.S_IFDIR:
		err = unix.Unlinkat(pfd, name, unix.AT_REMOVEDIR) // ENOTEMPTY when it is not empty
	default:
		return ErrNotPlaceholder
	}
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}

// holds reports whether the file name in directory dfd holds exactly content.
func holds(dfd int, name, content string) bool {
	if content == "" {
		return true // the size said so
	}
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	buf := make([]byte, len(content)+1)
	n, _ := unix.Read(fd, buf)
	return string(buf[:max(n, 0)]) == content
}
