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
