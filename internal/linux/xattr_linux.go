package linux

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// xattrMax is the kernel's bound on an attribute value and on a name list
// (XATTR_SIZE_MAX, XATTR_LIST_MAX): no read here allocates more.
const xattrMax = 64 << 10

// ListxattrAt lists the extended attribute names of the entry name of the directory
// dirfd itself (a symbolic link is not followed; "." is the directory), every
// namespace the caller may see. There is no listxattrat before Linux 6.13: the entry is
// reached as /proc/self/fd/<dirfd>/<name>, which resolves the directory by its
// descriptor and looks name up in it without following it.
//
// A walk lists every entry's attributes, and most entries have none or a few: the
// first try is into a buffer on the stack, which costs no allocation when there are
// none.
func ListxattrAt(dirfd int, name string) ([]string, error) {
	if !noListxattrat.Load() {
		var b [256]byte
		n, err := listxattrat(dirfd, name, b[:])
		switch {
		case err == nil:
			return splitXattrNames(b[:n]), nil
		case errors.Is(err, unix.ENOTSUP):
			return nil, nil
		case errors.Is(err, unix.ERANGE):
			// more than b holds: listed again below, into a buffer that grows
		case !errors.Is(err, unix.ENOSYS):
			return nil, &os.PathError{Op: "listxattr", Path: name, Err: err}
		}
		names, err := listxattr(name, func(buf []byte) (int, error) { return listxattrat(dirfd, name, buf) })
		if !errors.Is(err, unix.ENOSYS) {
			return names, err
		}
		noListxattrat.Store(true)
	}
	p := fdEntry(dirfd, name)
	return listxattr(name, func(buf []byte) (int, error) { return unix.Llistxattr(p, buf) })
}

// noListxattrat is set once the kernel lacks listxattrat (before 6.13).
var noListxattrat atomic.Bool

// listxattrat is listxattrat(2) of the entry name of dirfd, not following it: half
// the cost of the /proc path, which is looked up component by component.
func listxattrat(dirfd int, name string, buf []byte) (int, error) {
	var cn [cNameMax]byte
	p := &cn[0]
	if !cName(&cn, name) {
		var err error
		if p, err = unix.BytePtrFromString(name); err != nil {
			return 0, err
		}
	}
	var b unsafe.Pointer
	if len(buf) > 0 {
		b = unsafe.Pointer(&buf[0])
	}
	n, _, errno := unix.Syscall6(unix.SYS_LISTXATTRAT, uintptr(dirfd), uintptr(unsafe.Pointer(p)),
		unix.AT_SYMLINK_NOFOLLOW, uintptr(b), uintptr(len(buf)), 0)
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

// GetxattrAt reads the value of the attribute attr of the entry name of dirfd (as
// ListxattrAt reaches it) into a buffer of its own, at most 64 KiB (the kernel's
// bound); nil and no error when it has gone.
func GetxattrAt(dirfd int, name, attr string) ([]byte, error) {
	p := fdEntry(dirfd, name)
	buf := make([]byte, 256)
	for {
		n, err := unix.Lgetxattr(p, attr, buf)
		switch {
		case errors.Is(err, unix.ENODATA) || errors.Is(err, unix.ENOTSUP):
			return nil, nil
		case errors.Is(err, unix.ERANGE) && len(buf) < xattrMax:
			buf = make([]byte, min(4*len(buf), xattrMax))
			continue
		case err != nil:
			return nil, &os.PathError{Op: "getxattr", Path: name, Err: err}
		}
		return buf[:n], nil
	}
}

func fdEntry(dirfd int, name string) string { return fmt.Sprintf("/proc/self/fd/%d/%s", dirfd, name) }

// Llistxattr lists the extended attribute names of path itself (a link is not
// followed), at most 64 KiB of them (the kernel's bound).
func Llistxattr(path string) ([]string, error) {
	return listxattr(path, func(buf []byte) (int, error) { return unix.Llistxattr(path, buf) })
}

func listxattr(what string, list func([]byte) (int, error)) ([]string, error) {
	buf := make([]byte, 256)
	for {
		n, err := list(buf)
		switch {
		case errors.Is(err, unix.ENOTSUP):
			return nil, nil
		case errors.Is(err, unix.ERANGE) && len(buf) < xattrMax:
			buf = make([]byte, min(4*len(buf), xattrMax))
			continue
		case err != nil:
			return nil, &os.PathError{Op: "listxattr", Path: what, Err: err}
		}
		return splitXattrNames(buf[:n]), nil
	}
}

// splitXattrNames splits the kernel's list of NUL-terminated names; nil when empty.
func splitXattrNames(list []byte) []string {
	var names []string
	for start, i := 0, 0; i < len(list); i++ {
		if list[i] == 0 {
			if i > start {
				names = append(names, string(list[start:i]))
			}
			start = i + 1
		}
	}
	return names
}

// copyUserXattrs sets on dst the user.* extended attributes of src, at most max of
// them, and returns how many src has past max (not copied). Values are at most 64 KiB
// each (the kernel's bound).
func copyUserXattrs(dst, src int, max int) (skipped int, err error) {
	names, err := listxattr("staged file", func(buf []byte) (int, error) { return unix.Flistxattr(src, buf) })
	if err != nil {
		return 0, err
	}
	n := 0
	for _, name := range names {
		if !strings.HasPrefix(name, "user.") {
			continue
		}
		if n == max {
			skipped++
			continue
		}
		v, err := fgetxattr(src, name)
		if err != nil {
			return 0, err
		}
		if err := unix.Fsetxattr(dst, name, []byte(v), 0); err != nil {
			return 0, &os.PathError{Op: "setxattr", Path: name, Err: err}
		}
		n++
	}
	return skipped, nil
}

// MaxCarriedXattrs bounds the user.* extended attributes WriteFileLike and
// CopyXattrs land per path.
const MaxCarriedXattrs = 32

// WriteFileLike is WriteFile of src's content that also lands src's modification time
// and its user.* extended attributes (at most MaxCarriedXattrs; skipped says how many
// more src has, not landed). Attributes of other namespaces are never landed.
func (t *Tree) WriteFileLike(rel string, src *os.File, perm uint32, uid, gid int) (skipped int, err error) {
	fi, err := src.Stat()
	if err != nil {
		return 0, err
	}
	err = t.writeFile(rel, src, perm, uid, gid, func(f *os.File) error {
		if skipped, err = copyUserXattrs(int(f.Fd()), int(src.Fd()), MaxCarriedXattrs); err != nil {
			return err
		}
		mtime := unix.NsecToTimespec(fi.ModTime().UnixNano())
		return unix.UtimesNanoAt(int(f.Fd()), "", []unix.Timespec{{Nsec: unix.UTIME_OMIT}, mtime}, unix.AT_EMPTY_PATH)
	})
	return skipped, err
}

// CopyXattrs makes the user.* extended attributes of the directory rel of t those of
// the directory src: it sets src's (at most MaxCarriedXattrs; skipped says how many
// more, not landed) and removes the others.
func (t *Tree) CopyXattrs(rel string, src *os.File) (skipped int, err error) {
	fd, err := t.resolve(rel, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW)
	if err != nil {
		return 0, &os.PathError{Op: "open", Path: rel, Err: err}
	}
	defer unix.Close(fd)
	have, err := listxattr(rel, func(buf []byte) (int, error) { return unix.Flistxattr(fd, buf) })
	if err != nil {
		return 0, err
	}
	for _, name := range have {
		if !strings.HasPrefix(name, "user.") {
			continue
		}
		v, err := fgetxattr(int(src.Fd()), name)
		if err != nil {
			return 0, err
		}
		if v == "" {
			// Gone from the staged directory (or empty there: copied again below).
			if err := unix.Fremovexattr(fd, name); err != nil && !errors.Is(err, unix.ENODATA) {
				return 0, &os.PathError{Op: "removexattr", Path: rel, Err: err}
			}
		}
	}
	return copyUserXattrs(fd, int(src.Fd()), MaxCarriedXattrs)
}
