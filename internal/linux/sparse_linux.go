package linux

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// NextData returns the data extent of f that starts at or after off: [start, end).
// ok is false when only a hole is left before the end of the file. A file system
// without hole support reports the whole rest of the file as one extent.
func NextData(f *os.File, off int64) (start, end int64, ok bool, err error) {
	start, err = unix.Seek(int(f.Fd()), off, unix.SEEK_DATA)
	if errors.Is(err, unix.ENXIO) {
		return 0, 0, false, nil
	}
	if err != nil {
		return 0, 0, false, err
	}
	end, err = unix.Seek(int(f.Fd()), start, unix.SEEK_HOLE)
	if err != nil {
		return 0, 0, false, err
	}
	return start, end, true, nil
}

// DataExtents calls fn with each data extent of f within [from, to), clipped to it,
// in order: the holes between them are skipped (NextData). fn's error ends it.
func DataExtents(f *os.File, from, to int64, fn func(start, end int64) error) error {
	for off := from; off < to; {
		start, end, ok, err := NextData(f, off)
		if err != nil {
			return err
		}
		if !ok || start >= to {
			return nil
		}
		start, end = max(start, off), min(end, to)
		if err := fn(start, end); err != nil {
			return err
		}
		off = end
	}
	return nil
}
