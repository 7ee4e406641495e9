package linux

import (
	"os"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// WritableBelow lists root and every file and directory below it that this process
// may write ([Writable]: faccessat W_OK with its effective ids), but those skip says
// to pass over (a directory with all that is below it), in the order of a walk by
// sorted names, each directory before what it holds. Each directory is opened by one
// name relative to its parent, never following a symbolic link, and read once; each
// entry is asked about by name relative to it, not by its whole path. A directory
// that cannot be opened or read is not walked: what it holds cannot be listed, so not
// reached by name either.
func WritableBelow(root string, skip func(path string) bool) []string {
	if skip(root) {
		return nil
	}
	var out []string
	if Writable(root) {
		out = append(out, root)
	}
	if fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err == nil {
		writableIn(fd, root, skip, &out)
	}
	return out
}

// writableIn adds to out what below the directory dfd (at path dir) this process may
// write, as WritableBelow does; it closes dfd.
func writableIn(dfd int, dir string, skip func(string) bool, out *[]string) {
	d := os.NewFile(uintptr(dfd), dir)
	defer d.Close()
	entries, _ := d.ReadDir(-1)
	slices.SortFunc(entries, func(a, b os.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	for _, e := range entries {
		p := dir + "/" + e.Name()
		if skip(p) {
			continue
		}
		if unix.Faccessat(dfd, e.Name(), unix.W_OK, unix.AT_EACCESS) == nil {
			*out = append(*out, p)
		}
		if !e.IsDir() {
			continue
		}
		if sub, err := unix.Openat(dfd, e.Name(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err == nil {
			writableIn(sub, p, skip, out)
		}
	}
}
