package outcap

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Sweep removes the regular files in dir, the spill files of an agent's turn, and
// returns how many it removed. It leaves subdirectories, symlinks and other special
// files alone, and follows no symlink. A missing dir has nothing to sweep. It goes on
// past a file it cannot remove and returns every such error.
func Sweep(dir string) (removed int, err error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sweeping spill files: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		err := os.Remove(filepath.Join(dir, e.Name()))
		switch {
		case err == nil:
			removed++
		case !errors.Is(err, fs.ErrNotExist):
			errs = append(errs, err)
		}
	}
	return removed, errors.Join(errs...)
}
