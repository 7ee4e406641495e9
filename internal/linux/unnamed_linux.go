package linux

import (
	"os"

	"golang.org/x/sys/unix"
)

// OnNoFileSystem reports whether f is an anonymous pipe, a socket or a pseudo-terminal:
// a descriptor whose inode is on the kernel's pipefs, sockfs or devpts, none of which
// a workspace can be, so that a write to it changes no file of one. A named pipe, a
// regular file or a device node is on the file system that holds its name.
func OnNoFileSystem(f *os.File) bool {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return false
	}
	switch uint32(st.Type) {
	case pipefsMagic, sockfsMagic, uint32(unix.DEVPTS_SUPER_MAGIC):
		return true
	}
	return false
}

// pipefs's and sockfs's statfs f_type (linux/magic.h).
const (
	pipefsMagic = 0x50495045
	sockfsMagic = 0x534f434b
)
