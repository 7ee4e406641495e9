//go:build !linux

package safefs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// Dir is a directory beneath which files are opened safely. Not safe for
// concurrent Close; its other methods are.
type Dir struct {
	r *os.Root
}

// OpenDir opens the directory rel beneath base. base is trusted and followed as
// named; rel must not be a link ("." is base itself).
func OpenDir(base, rel string) (*Dir, error) {
	r, err := os.OpenRoot(base)
	if err != nil {
		return nil, err
	}
	if rel == "." {
		return &Dir{r: r}, nil
	}
	defer r.Close()
	return (&Dir{r: r}).Sub(rel)
}

// Close releases d.
func (d *Dir) Close() error { return d.r.Close() }

// Sub opens the directory rel beneath d as a Dir of its own.
func (d *Dir) Sub(rel string) (*Dir, error) {
	fi, err := d.r.Lstat(rel)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, &fs.PathError{Op: "open", Path: rel, Err: syscall.ENOTDIR}
	}
	r, err := d.r.OpenRoot(rel)
	if err != nil {
		return nil, err
	}
	if got, err := r.Stat("."); err != nil || !os.SameFile(got, fi) {
		r.Close()
		return nil, &fs.PathError{Op: "open", Path: rel, Err: fmt.Errorf("replaced while opening it")}
	}
	return &Dir{r: r}, nil
}

// OpenDirFile opens the directory rel beneath d as a file, to read its entries or
// its extended attributes.
func (d *Dir) OpenDirFile(rel string) (*os.File, error) {
	sub, err := d.Sub(rel)
	if err != nil {
		return nil, err
	}
	defer sub.Close()
	return sub.r.Open(".")
}

// Lstat describes rel itself (a link at rel is described, not followed).
func (d *Dir) Lstat(rel string) (fs.FileInfo, error) { return d.r.Lstat(rel) }

// Names lists at most n entries of the directory rel (every entry when n <= 0).
func (d *Dir) Names(rel string, n int) ([]string, error) {
	f, err := d.r.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.IsDir() {
		return nil, &fs.PathError{Op: "readdir", Path: rel, Err: syscall.ENOTDIR}
	}
	names, err := f.Readdirnames(n)
	if errors.Is(err, io.EOF) {
		err = nil // an empty directory, read n at a time
	}
	return names, err
}

func (d *Dir) open(rel string) (*os.File, error) {
	fi, err := d.r.Lstat(rel)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "open", Path: rel, Err: fmt.Errorf("%w (%s)", ErrNotRegular, fi.Mode().Type())}
	}
	f, err := d.r.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	if got, err := f.Stat(); err != nil || !os.SameFile(got, fi) {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: rel, Err: fmt.Errorf("replaced while opening it")}
	}
	return f, nil
}
