package linux

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// XattrCapability is the extended attribute that holds a file's capabilities.
const XattrCapability = "security.capability"

// Privileges are what DropPrivileges removed from a file.
type Privileges struct {
	SetID      uint32 // the set-user-ID and set-group-ID bits it had (0o6000 at most)
	Capability []byte // the value of its security.capability, nil when it had none
}

// DropPrivileges removes from the regular file rel (reached without a link, below
// the tree) its set-user-ID and set-group-ID bits and its file capabilities, and
// returns what it had. A write(2) to a file takes these away (the kernel's
// file_remove_privs); a write through a shared mapping of it does not, so a file a
// sandbox rewrote that way would keep its privileges with the sandbox's bytes. A
// file that is not regular, or gone, is left: nothing is returned.
func (t *Tree) DropPrivileges(rel string) (Privileges, error) {
	var p Privileges
	fd, err := t.resolve(rel, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENXIO) {
			return p, nil
		}
		return p, &os.PathError{Op: "open", Path: rel, Err: err}
	}
	defer unix.Close(fd)
	return dropFd(fd, rel)
}

// dropFd is DropPrivileges of the open file fd (rel, for errors): nothing for one that
// is not a regular file.
func dropFd(fd int, rel string) (Privileges, error) {
	var p Privileges
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return p, &os.PathError{Op: "fstat", Path: rel, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return p, nil
	}
	if cap, err := fgetxattrBytes(fd, XattrCapability); err != nil {
		return p, &os.PathError{Op: "getxattr", Path: rel, Err: err}
	} else if cap != nil {
		if err := unix.Fremovexattr(fd, XattrCapability); err != nil && !errors.Is(err, unix.ENODATA) {
			return p, &os.PathError{Op: "removexattr", Path: rel, Err: err}
		}
		p.Capability = cap
	}
	if id := st.Mode & (unix.S_ISUID | unix.S_ISGID); id != 0 {
		if err := unix.Fchmod(fd, st.Mode&0o7777&^(unix.S_ISUID|unix.S_ISGID)); err != nil {
			return p, &os.PathError{Op: "chmod", Path: rel, Err: err}
		}
		p.SetID = id
	}
	return p, nil
}

// fgetxattrBytes is the value of fd's attribute name, nil when it has none (or the
// file system keeps no attributes).
func fgetxattrBytes(fd int, name string) ([]byte, error) {
	buf := make([]byte, 256) // a capability is 20 or 24 bytes
	for {
		n, err := unix.Fgetxattr(fd, name, buf)
		switch {
		case err == nil:
			return buf[:n], nil
		case errors.Is(err, unix.ENODATA) || errors.Is(err, unix.ENOTSUP):
			return nil, nil
		case errors.Is(err, unix.ERANGE) && len(buf) < 64<<10:
			buf = make([]byte, 64<<10)
		default:
			return nil, err
		}
	}
}

// DropPrivilegesSince walks the directory rel of the tree (its whole depth, no link
// followed, no mount crossed) and takes from every regular file whose status changed
// at or after since (ns: ctime, which a write through a mapping, a rename and a link
// all move) its set-id bits and file capabilities (DropPrivileges), calling dropped for
// each that had some. It is what finds a file no list of changes names: one past a
// diff's bound, inside a repository's .git, or paired by a diff as a rename. It visits
// at most max entries (0: no bound) and says, with ErrTooMany, when it stopped there.
func (t *Tree) DropPrivilegesSince(rel string, since int64, max int, dropped func(rel string, p Privileges)) error {
	fd, err := t.resolve(rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return &os.PathError{Op: "open", Path: rel, Err: err}
	}
	w := privWalk{since: since, left: max, dropped: dropped}
	if max <= 0 {
		w.left = -1
	}
	return w.dir(fd, rel)
}

// ErrTooMany: a walk stopped at its bound of entries.
var ErrTooMany = errors.New("more entries than the walk's bound")

type privWalk struct {
	since   int64
	left    int // entries still to visit; -1 for no bound
	dropped func(string, Privileges)
}

// dir walks the open directory fd (rel below the tree) and closes it.
func (w *privWalk) dir(fd int, rel string) error {
	d := os.NewFile(uintptr(fd), rel)
	defer d.Close()
	var dev uint64
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	dev = st.Dev
	for {
		names, err := d.Readdirnames(256)
		for _, name := range names {
			if w.left == 0 {
				return ErrTooMany
			}
			if w.left > 0 {
				w.left--
			}
			if err := w.entry(fd, rel, name, dev); err != nil {
				return err
			}
		}
		if err != nil {
			return nil // io.EOF, or a directory gone meanwhile
		}
	}
}

// entry looks at name in the directory fd (rel below the tree, on device dev).
func (w *privWalk) entry(fd int, rel, name string, dev uint64) error {
	var st unix.Stat_t
	if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil // gone meanwhile
	}
	crel := name
	if rel != "." && rel != "" {
		crel = rel + "/" + name
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		if st.Dev != dev {
			return nil // a mount: not the tree's
		}
		sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil // gone, or replaced by a link, meanwhile
		}
		return w.dir(sub, crel)
	case unix.S_IFREG:
		if st.Ctim.Nano() < w.since {
			return nil
		}
		f, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil
		}
		defer unix.Close(f)
		p, err := dropFd(f, crel)
		if err != nil {
			return err
		}
		if p.SetID != 0 || p.Capability != nil {
			w.dropped(crel, p)
		}
	}
	return nil
}
