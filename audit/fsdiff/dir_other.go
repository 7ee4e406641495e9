//go:build !linux

package fsdiff

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// rootDir is a directory of the workspace as an [os.Root].
type rootDir struct{ r *os.Root }

func openTop(dir string) (dirHandle, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return rootDir{r}, nil
}

func (d rootDir) names(keep int) ([]string, int, error) { return readDirNames(d.r, keep) }

func (d rootDir) lstat(name string) (fs.FileInfo, error) { return d.r.Lstat(name) }

func (d rootDir) stat() (fs.FileInfo, error) { return d.r.Stat(".") }

func (d rootDir) sub(name string) (dirHandle, error) {
	fi, err := d.r.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.ENOTDIR}
	}
	r, err := d.r.OpenRoot(name)
	if err != nil {
		return nil, err
	}
	return rootDir{r}, nil
}

func (d rootDir) open(name string) (*os.File, error) {
	return d.r.OpenFile(name, os.O_RDONLY|oNonblock, 0)
}

func (d rootDir) readlink(name string) (string, error) { return d.r.Readlink(name) }

func (d rootDir) close() { d.r.Close() }

func readDirNames(r *os.Root, keep int) ([]string, int, error) {
	d, err := r.Open(".")
	if err != nil {
		return nil, 0, err
	}
	defer d.Close()
	s := smallest{keep: keep}
	for {
		batch, err := d.Readdirnames(1024)
		s.offer(batch)
		if errors.Is(err, io.EOF) {
			return s.sorted(), s.total, nil
		}
		if err != nil {
			return s.sorted(), s.total, err
		}
	}
}

// Extended attributes are read on Linux only: elsewhere none are recorded.
func (rootDir) xattrNames(string) ([]string, error) { return nil, nil }

func (rootDir) xattrValue(string, string) ([]byte, error) { return nil, nil }
