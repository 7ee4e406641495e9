package linux

import "golang.org/x/sys/unix"

// holdFlags open an entry to hold it (Made.Hold): read-only and without waiting (a
// fifo), no link at its name. (Darwin has no O_PATH.)
const holdFlags = unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOFOLLOW | unix.O_CLOEXEC

// renameNoReplace renames from to to in the directory dfd unless something is at to
// (EEXIST).
func renameNoReplace(dfd int, from, to string) error {
	return unix.RenameatxNp(dfd, from, dfd, to, unix.RENAME_EXCL)
}
