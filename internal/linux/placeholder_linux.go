package linux

import (
	"errors"

	"golang.org/x/sys/unix"
)

// holdFlags open an entry to hold it (Made.Hold): a path only, whatever it is, and
// no link at its name.
const holdFlags = unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC

// renameat2 is unix.Renameat2; tests make it fail as a file system without
// RENAME_NOREPLACE does.
var renameat2 = unix.Renameat2

// renameNoReplace renames from to to in the directory dfd unless something is at to
// (EEXIST). Where the file system has no exclusive rename (RENAME_NOREPLACE: NFS,
// some FUSE file systems), a file is linked to its new name and unlinked from the old,
// which fails alike; a directory is renamed after a look at to, which then replaces
// only an empty directory made in between (a rename over anything else fails).
func renameNoReplace(dfd int, from, to string) error {
	err := renameat2(dfd, from, dfd, to, unix.RENAME_NOREPLACE)
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) {
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, from, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		if err := unix.Linkat(dfd, from, dfd, to, 0); err != nil {
			return err
		}
		return unix.Unlinkat(dfd, from, 0)
	}
	if err := unix.Fstatat(dfd, to, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
		return unix.EEXIST
	} else if !errors.Is(err, unix.ENOENT) {
		return err
	}
	return unix.Renameat(dfd, from, dfd, to)
}
