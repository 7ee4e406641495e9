//go:build linux && !(amd64 || arm64)

package linux

import "golang.org/x/sys/unix"

// lstatat is fstatat(dirfd, name, AT_SYMLINK_NOFOLLOW).
func lstatat(dirfd int, name string, st *unix.Stat_t) error {
	return unix.Fstatat(dirfd, name, st, unix.AT_SYMLINK_NOFOLLOW)
}
