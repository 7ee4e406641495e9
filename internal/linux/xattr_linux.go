package linux

import (
	"errors"
	"fmt"
	"os"

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
func ListxattrAt(dirfd int, name string) ([]string, error) {
	p := fdEntry(dirfd, name)
	buf := make([]byte, 256)
	for {
		n, err := unix.Llistxattr(p, buf)
		switch {
		case errors.Is(err, unix.ENOTSUP):
			return nil, nil
		case errors.Is(err, unix.ERANGE) && len(buf) < xattrMax:
			buf = make([]byte, min(4*len(buf), xattrMax))
			continue
		case err != nil:
			return nil, &os.PathError{Op: "listxattr", Path: name, Err: err}
		}
		var names []string
		for start, i := 0, 0; i < n; i++ {
			if buf[i] == 0 {
				if i > start {
					names = append(names, string(buf[start:i]))
				}
				start = i + 1
			}
		}
		return names, nil
	}
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
