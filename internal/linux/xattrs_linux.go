package linux

import (
	"errors"
	"fmt"
	"os"
	"path"
	"sort"

	"golang.org/x/sys/unix"
)

// Xattr is one extended attribute of an entry: its name and its value.
type Xattr struct {
	Name, Value string
}

// ErrXattrsPastBound means an entry has more extended attributes, or more bytes of
// their values, than a reader of it takes.
var ErrXattrsPastBound = errors.New("more extended attributes than are read")

// xattrsAt reads the extended attributes of the entry name of the directory dirfd
// itself (a link is not followed), every namespace the caller may see, in the order
// of their names: at most maxNames names, and maxBytes bytes of values in all (each
// value is at most 64 KiB, the kernel's bound); past either, [ErrXattrsPastBound].
// n counts the bytes of values it read, past the bound too, for a caller that
// charges them to a budget. An attribute removed between the listing and its
// reading is left out.
func xattrsAt(dirfd int, name string, maxNames, maxBytes int) (attrs []Xattr, n int, err error) {
	names, err := ListxattrAt(dirfd, name)
	if err != nil {
		return nil, 0, err
	}
	if len(names) > maxNames {
		return nil, 0, fmt.Errorf("%s: %w (%d names; at most %d)", name, ErrXattrsPastBound, len(names), maxNames)
	}
	sort.Strings(names)
	for _, a := range names {
		v, err := GetxattrAt(dirfd, name, a)
		if err != nil {
			return nil, n, err
		}
		if v == nil {
			continue // gone meanwhile
		}
		if n += len(v); n > maxBytes {
			return nil, n, fmt.Errorf("%s: %w (more than %d bytes of values)", name, ErrXattrsPastBound, maxBytes)
		}
		attrs = append(attrs, Xattr{a, string(v)})
	}
	return attrs, n, nil
}

// Xattrs reads the extended attributes of the entry name of d itself, sorted by
// name, at most maxNames of them and maxBytes bytes of their values (past either,
// [ErrXattrsPastBound]); n is the bytes of values read.
func (d *Dir) Xattrs(name string, maxNames, maxBytes int) (attrs []Xattr, n int, err error) {
	if err := entryName(name); err != nil {
		return nil, 0, err
	}
	return xattrsAt(int(d.f.Fd()), name, maxNames, maxBytes)
}

// OwnXattrs is [Dir.Xattrs] of d itself.
func (d *Dir) OwnXattrs(maxNames, maxBytes int) (attrs []Xattr, n int, err error) {
	return xattrsAt(int(d.f.Fd()), ".", maxNames, maxBytes)
}

// Xattrs is [Dir.Xattrs] of rel itself (a link is not followed) below t.
func (t *Tree) Xattrs(rel string, maxNames, maxBytes int) (attrs []Xattr, n int, err error) {
	pfd, name, err := t.parent(rel)
	if err != nil {
		return nil, 0, err
	}
	defer unix.Close(pfd)
	return xattrsAt(pfd, name, maxNames, maxBytes)
}

// Listxattr lists the extended attribute names of rel itself (a link is not
// followed), every namespace the caller may see (64 KiB of names at most: the
// kernel's bound).
func (t *Tree) Listxattr(rel string) ([]string, error) {
	pfd, name, err := t.parent(rel)
	if err != nil {
		return nil, err
	}
	defer unix.Close(pfd)
	return ListxattrAt(pfd, name)
}

// XattrValue returns the value of the extended attribute attr of rel itself (a link
// is not followed): nil when rel has none of that name.
func (t *Tree) XattrValue(rel, attr string) ([]byte, error) {
	pfd, name, err := t.parent(rel)
	if err != nil {
		return nil, err
	}
	defer unix.Close(pfd)
	return GetxattrAt(pfd, name, attr)
}

// Setxattr sets the extended attribute attr of rel itself (a link is not followed;
// the kernel refuses user.* attributes on one) to value.
func (t *Tree) Setxattr(rel, attr, value string) error {
	pfd, name, err := t.parent(rel)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	// No setxattrat before Linux 6.13: the entry is reached through the directory's
	// descriptor, as ListxattrAt does, and not followed.
	if err := unix.Lsetxattr(fdEntry(pfd, name), attr, []byte(value), 0); err != nil {
		return &os.PathError{Op: "setxattr", Path: path.Clean(rel), Err: err}
	}
	return nil
}

// Removexattr removes the extended attribute attr of rel itself (a link is not
// followed); one already gone is no error.
func (t *Tree) Removexattr(rel, attr string) error {
	pfd, name, err := t.parent(rel)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	if err := unix.Lremovexattr(fdEntry(pfd, name), attr); err != nil && !errors.Is(err, unix.ENODATA) {
		return &os.PathError{Op: "removexattr", Path: path.Clean(rel), Err: err}
	}
	return nil
}
