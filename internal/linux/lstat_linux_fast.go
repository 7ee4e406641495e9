//go:build linux && (amd64 || arm64)

package linux

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// lstatat is fstatat(dirfd, name, AT_SYMLINK_NOFOLLOW). A name that fits is passed
// from a buffer on the stack: a walk makes one call per entry, and x/sys/unix would
// allocate a copy of each name.
func lstatat(dirfd int, name string, st *unix.Stat_t) error {
	var b [cNameMax]byte
	if !cName(&b, name) {
		return unix.Fstatat(dirfd, name, st, unix.AT_SYMLINK_NOFOLLOW)
	}
	_, _, errno := unix.Syscall6(unix.SYS_NEWFSTATAT, uintptr(dirfd), uintptr(unsafe.Pointer(&b[0])),
		uintptr(unsafe.Pointer(st)), unix.AT_SYMLINK_NOFOLLOW, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
