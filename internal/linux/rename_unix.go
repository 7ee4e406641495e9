//go:build linux || darwin

package linux

import (
	"errors"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// RenameNoLinks renames p to newName in the same directory, following no symbolic
// link on the way to it (the directory is the sandbox's to write), and never over an
// existing newName.
func RenameNoLinks(p, newName string) error {
	_, err := RenameNoLinksFirst(p, []string{newName})
	return err
}

// RenameNoLinksFirst renames p, in its directory, to the first of names no entry
// there has, following no symbolic link on the way to it (the directory is the
// sandbox's to write), and returns the name it took. The directory is reached once,
// however many of names are taken: the sandbox can take them all, and a walk of a
// deep path for each would make every rename cost it many. The error is the last
// rename's when every name is taken.
func RenameNoLinksFirst(p string, names []string) (string, error) {
	pfd, err := openParentNoLinks(p, false)
	if err != nil {
		return "", err
	}
	defer unix.Close(pfd)
	err = unix.EEXIST
	for _, n := range names {
		err = renameExcl(pfd, filepath.Base(p), n)
		if err == nil {
			return n, nil
		}
		if !errors.Is(err, unix.EEXIST) {
			return "", err
		}
	}
	return "", err
}
