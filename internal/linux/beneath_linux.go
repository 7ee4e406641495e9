package linux

import (
	"errors"
	"io"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// Sub opens the directory rel of t as a Tree of its own, resolved as every path of
// t is (no link, no mount crossing, not out of t).
func (t *Tree) Sub(rel string) (*Tree, error) {
	f, err := t.OpenDirFile(rel)
	if err != nil {
		return nil, err
	}
	return &Tree{root: f}, nil
}

// OpenDirFile opens the directory rel of t for reading (its entries, its extended
// attributes), resolved as every path of t is.
func (t *Tree) OpenDirFile(rel string) (*os.File, error) {
	fd, err := t.resolve(rel, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: rel, Err: err}
	}
	return os.NewFile(uintptr(fd), rel), nil
}

// Info describes rel itself (a link at rel is described, not followed; a link on
// the way is refused).
func (t *Tree) Info(rel string) (fs.FileInfo, error) {
	fd, err := t.resolve(rel, unix.O_PATH|unix.O_NOFOLLOW)
	if err != nil {
		return nil, &os.PathError{Op: "lstat", Path: rel, Err: err}
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	return f.Stat()
}

// ReadNames lists at most n entries of the directory rel (all of them when n <= 0).
func (t *Tree) ReadNames(rel string, n int) ([]string, error) {
	fd, err := t.resolve(rel, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: rel, Err: err}
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	names, err := f.Readdirnames(n)
	if errors.Is(err, io.EOF) {
		err = nil // an empty directory, read n at a time
	}
	return names, err
}
