package outcap

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"
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

// DefaultMaxSpillTotal bounds the spill files of one directory (a session) together:
// each is bounded by [Options.MaxSpill], and a session running many commands between
// two sweeps would otherwise fill the host's disk.
const DefaultMaxSpillTotal = 256 << 20

// Trim removes dir's spill files, oldest first, until what is left holds at most max
// bytes (<= 0 means [DefaultMaxSpillTotal]). It returns how many it removed.
func Trim(dir string, max int64) (removed int, err error) {
	if max <= 0 {
		max = DefaultMaxSpillTotal
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("trimming spill files: %w", err)
	}
	type spill struct {
		name string
		size int64
		mod  time.Time
	}
	var files []spill
	var total int64
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		files = append(files, spill{e.Name(), fi.Size(), fi.ModTime()})
		total += fi.Size()
	}
	sort.Slice(files, func(i, j int) bool { return files[i].mod.Before(files[j].mod) })
	var errs []error
	for _, f := range files {
		if total <= max {
			break
		}
		if err := os.Remove(filepath.Join(dir, f.name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		total -= f.size
		removed++
	}
	return removed, errors.Join(errs...)
}
