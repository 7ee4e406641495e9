package linux

import "golang.org/x/sys/unix"

// renameNoReplace renames from to to in the directory dfd unless something is at to
// (EEXIST).
func renameNoReplace(dfd int, from, to string) error {
	return unix.RenameatxNp(dfd, from, dfd, to, unix.RENAME_EXCL)
}
