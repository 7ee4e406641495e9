package linux

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// removeDepth bounds the directories RemoveTree holds open at once: a deeper one is
// moved up to the top of the tree first.
const removeDepth = 32

// RemoveTree removes dir and everything below it, following no link, holding at most a
// few dozen descriptors however deep the tree is. os.RemoveAll holds one per level, and
// a sandbox can make a tree tens of thousands of levels deep in its workspace: removing
// it would take every descriptor of the process doing it (a server's, for all its
// tenants). A directory past removeDepth levels is renamed to dir's top level and
// removed from there; nothing is ever reached through "..". A missing dir is no error.
func RemoveTree(dir string) error {
	how := unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	top, err := unix.Openat2(unix.AT_FDCWD, dir, &how)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("removing %s: %w", dir, err)
	}
	r := &remover{top: top}
	err = r.empty(top, 0)
	unix.Close(top)
	if err != nil {
		return fmt.Errorf("removing %s: %w", dir, err)
	}
	if err := unix.Rmdir(dir); err != nil && !errors.Is(err, unix.ENOENT) {
		return &os.PathError{Op: "remove", Path: dir, Err: err}
	}
	return nil
}

type remover struct {
	top   int // the tree's top directory: where too-deep directories are moved
	moved int // directories moved up, for their names
}

// empty removes everything in the directory open as fd, depth levels below the top.
// It reads the directory again until it is empty: what it moved up to the top is
// removed on the top's next pass.
func (r *remover) empty(fd, depth int) error {
	for {
		names, err := readNames(fd)
		if err != nil || len(names) == 0 {
			return err
		}
		for _, name := range names {
			if err := r.remove(fd, name, depth); err != nil {
				return err
			}
		}
	}
}

// remove removes name from the directory open as fd.
func (r *remover) remove(fd int, name string, depth int) error {
	err := unix.Unlinkat(fd, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
		return fmt.Errorf("%s: %w", name, err)
	}
	if depth+1 >= removeDepth {
		for {
			r.moved++
			up := ".cordon-rm-" + strconv.Itoa(r.moved)
			err := unix.Renameat2(fd, name, r.top, up, unix.RENAME_NOREPLACE)
			if !errors.Is(err, unix.EEXIST) { // a name the tree already has: the next one
				if err != nil {
					return fmt.Errorf("moving %s up: %w", name, err)
				}
				return nil
			}
		}
	}
	sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	err = r.empty(sub, depth+1)
	unix.Close(sub)
	if err != nil {
		return err
	}
	if err := unix.Unlinkat(fd, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// readNames reads up to a batch of the names in the directory open as fd, from its
// start ("." and ".." left out); none only when the directory is empty. One getdents
// may return fewer entries than fit, even only "." (a signal, the file system's
// batching): it is read again until it has a name or says it is at the end.
func readNames(fd int) ([]string, error) {
	if _, err := unix.Seek(fd, 0, 0); err != nil {
		return nil, err
	}
	buf := make([]byte, 32<<10)
	var names []string
	for len(names) == 0 {
		n, err := unix.ReadDirent(fd, buf)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			break
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
	return names, nil
}
