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
