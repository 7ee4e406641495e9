package safefs

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"github.com/cordonhq/cordon/internal/linux"
)

// Dir is a directory beneath which files are opened safely. Not safe for
// concurrent Close; its other methods are.
type Dir struct {
	t *linux.Tree
}

// OpenDir opens the directory rel beneath base. base is trusted and followed as
// named; rel is resolved as every path of a Dir is ("." is base itself).
func OpenDir(base, rel string) (*Dir, error) {
	f, err := os.OpenFile(base, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t, err := linux.TreeOf(f)
	if err != nil {
		return nil, err
	}
	if rel == "." {
		return &Dir{t: t}, nil
	}
	defer t.Close()
	return (&Dir{t: t}).Sub(rel)
}

// Close releases d.
func (d *Dir) Close() error { return d.t.Close() }

// Sub opens the directory rel beneath d as a Dir of its own.
func (d *Dir) Sub(rel string) (*Dir, error) {
	t, err := d.t.Sub(rel)
	if err != nil {
		return nil, err
	}
	return &Dir{t: t}, nil
}

// OpenDirFile opens the directory rel beneath d as a file, to read its entries or
// its extended attributes.
func (d *Dir) OpenDirFile(rel string) (*os.File, error) { return d.t.OpenDirFile(rel) }

// Lstat describes rel itself: a link at rel is described, one on the way refused.
func (d *Dir) Lstat(rel string) (fs.FileInfo, error) { return d.t.Info(rel) }

// Names lists at most n entries of the directory rel (every entry when n <= 0).
func (d *Dir) Names(rel string, n int) ([]string, error) { return d.t.ReadNames(rel, n) }

func (d *Dir) open(rel string) (*os.File, error) {
	f, err := d.t.Open(rel)
	if err != nil {
		return nil, fmt.Errorf("%w (a link or a mount point on the way, or at the end, is refused)", err)
	}
	return f, nil
}
