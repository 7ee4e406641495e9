package linux

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// TreeOf is the Tree rooted at the directory f (a live overlay's mount, say), which
// it duplicates: closing the Tree leaves f open.
func TreeOf(f *os.File) (*Tree, error) {
	d, err := DupFile(f)
	if err != nil {
		return nil, err
	}
	return &Tree{root: d}, nil
}

// DupFile duplicates f (close-on-exec).
func DupFile(f *os.File) (*os.File, error) {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("duplicating %s: %w", f.Name(), err)
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// Open opens rel for reading: a regular file, never through a link, without
// blocking on a FIFO put in its place (the caller checks what it opened).
func (t *Tree) Open(rel string) (*os.File, error) {
	fd, err := t.resolve(rel, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: rel, Err: err}
	}
	return os.NewFile(uintptr(fd), rel), nil
}

// Readlink returns the target of the symbolic link rel.
func (t *Tree) Readlink(rel string) (string, error) {
	pfd, name, err := t.parent(rel)
	if err != nil {
		return "", err
	}
	defer unix.Close(pfd)
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(pfd, name, buf)
	if err != nil {
		return "", &os.PathError{Op: "readlink", Path: rel, Err: err}
	}
	return string(buf[:n]), nil
}

// Chmod sets the permission bits of the directory rel (never set-id or sticky).
func (t *Tree) Chmod(rel string, perm uint32) error {
	fd, err := t.resolve(rel, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW)
	if err != nil {
		return &os.PathError{Op: "open", Path: rel, Err: err}
	}
	defer unix.Close(fd)
	if err := unix.Fchmod(fd, perm&0o777); err != nil {
		return &os.PathError{Op: "chmod", Path: rel, Err: err}
	}
	return nil
}

// Owner is the owner of the tree's root.
func (t *Tree) Owner() (uid, gid int, err error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(t.root.Fd()), &st); err != nil {
		return -1, -1, err
	}
	return int(st.Uid), int(st.Gid), nil
}

// Path is the path through which this process reaches the tree's root.
func (t *Tree) Path() string { return FDPath(t.root) }

// Whiteout makes p an overlay whiteout (a 0/0 character device) with no permission
// bits; p must not exist.
func Whiteout(p string) error {
	if err := unix.Mknod(p, unix.S_IFCHR, 0); err != nil {
		return &os.PathError{Op: "mknod", Path: p, Err: err}
	}
	return nil
}

// Lsetxattr sets the extended attribute name of p itself (not what a link points to).
func Lsetxattr(p, name, value string) error {
	if err := unix.Lsetxattr(p, name, []byte(value), 0); err != nil {
		return &os.PathError{Op: "setxattr", Path: p, Err: err}
	}
	return nil
}

// Lremovexattr removes the extended attribute name of p itself.
func Lremovexattr(p, name string) error {
	if err := unix.Lremovexattr(p, name); err != nil {
		return &os.PathError{Op: "removexattr", Path: p, Err: err}
	}
	return nil
}

// Getxattr returns the value of the extended attribute name of the directory or
// regular file rel ("" when it has none), opened without following a link.
func (t *Tree) Getxattr(rel, name string) (string, error) {
	fd, err := t.resolve(rel, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		return "", &os.PathError{Op: "open", Path: rel, Err: err}
	}
	defer unix.Close(fd)
	return fgetxattr(fd, name)
}

// CopySparse copies the regular file src to the new file dst, holes kept as holes
// (see copyData: root writing a sandbox's sparse file out as zeros could fill the
// disk).
func CopySparse(dst, src *os.File) error { return copyData(dst, src) }

// Dir is an open directory of a Tree whose entries are reached by name, one
// component at a time, never through a link: a walk of a tree someone else writes
// costs one open per directory, not one lookup from the root per entry.
type Dir struct {
	f *os.File
}

// OpenDir opens the directory rel of t.
func (t *Tree) OpenDir(rel string) (*Dir, error) {
	fd, err := t.resolve(rel, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: rel, Err: err}
	}
	return &Dir{f: os.NewFile(uintptr(fd), rel)}, nil
}

// Close closes d.
func (d *Dir) Close() error { return d.f.Close() }

func entryName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return fmt.Errorf("%q: not an entry name", name)
	}
	return nil
}

// Names lists d's entries (once: it reads the directory).
func (d *Dir) Names() ([]string, error) { return d.f.Readdirnames(-1) }

// EachNames reads d's entries from its first, at most n at a time, and calls fn with
// each batch (the slice is fn's): a directory of millions of names is never held
// whole. It may be called again, each call reading the directory anew; fn's error
// stops it and is returned as it is.
func (d *Dir) EachNames(n int, fn func([]string) error) error {
	if _, err := d.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	for {
		batch, err := d.f.Readdirnames(n)
		if len(batch) > 0 {
			if ferr := fn(batch); ferr != nil {
				return ferr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// Lstat describes the entry name itself.
func (d *Dir) Lstat(name string) (*unix.Stat_t, error) {
	if err := entryName(name); err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstatat(int(d.f.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, &os.PathError{Op: "lstat", Path: name, Err: err}
	}
	return &st, nil
}

// Open opens the entry name for reading, not through a link, without blocking on a
// FIFO (the caller checks what it opened).
func (d *Dir) Open(name string) (*os.File, error) {
	return d.openat(name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY)
}

// Sub opens the entry name as a directory, not through a link.
func (d *Dir) Sub(name string) (*Dir, error) {
	f, err := d.openat(name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW)
	if err != nil {
		return nil, err
	}
	return &Dir{f: f}, nil
}

func (d *Dir) openat(name string, flags int) (*os.File, error) {
	if err := entryName(name); err != nil {
		return nil, err
	}
	fd, err := unix.Openat(int(d.f.Fd()), name, flags|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), name), nil
}

// Readlink returns the target of the symbolic link name.
func (d *Dir) Readlink(name string) (string, error) {
	if err := entryName(name); err != nil {
		return "", err
	}
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(int(d.f.Fd()), name, buf)
	if err != nil {
		return "", &os.PathError{Op: "readlink", Path: name, Err: err}
	}
	return string(buf[:n]), nil
}

// Listxattr lists the extended attribute names of the entry name of d itself (a
// link is not followed), every namespace the caller may see.
func (d *Dir) Listxattr(name string) ([]string, error) {
	if err := entryName(name); err != nil {
		return nil, err
	}
	return ListxattrAt(int(d.f.Fd()), name)
}

// SetMtime sets the modification time of the open file f to mtime (its access time
// is left as it is).
func SetMtime(f *os.File, mtime time.Time) error {
	ts := unix.NsecToTimespec(mtime.UnixNano())
	return unix.UtimesNanoAt(int(f.Fd()), "", []unix.Timespec{{Nsec: unix.UTIME_OMIT}, ts}, unix.AT_EMPTY_PATH)
}

// Getxattr returns the value of d's own extended attribute attr ("" when none).
func (d *Dir) Getxattr(attr string) (string, error) { return fgetxattr(int(d.f.Fd()), attr) }

func fgetxattr(fd int, name string) (string, error) {
	return getxattr(name, name, func(buf []byte) (int, error) { return unix.Fgetxattr(fd, name, buf) })
}
