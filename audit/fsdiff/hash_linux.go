package fsdiff

import (
	"hash"
	"io"
	"os"

	"github.com/cordonhq/cordon/internal/linux"
)

// hashFrom writes the content of f from off to size into h and returns the bytes it
// read: only data extents are read, a hole is hashed as the zeros it reads as
// (SEEK_DATA/SEEK_HOLE), so a sparse file costs what it holds on disk in reads.
// stop is checked between chunks; when it says so, hashFrom gives up with errStopped.
func hashFrom(f *os.File, h hash.Hash, off, size int64, stop func() bool) (read int64, err error) {
	for off < size {
		start, end, ok, err := linux.NextData(f, off)
		if err != nil {
			return read, err
		}
		if !ok || start >= size {
			start, end = size, size
		}
		if err := hashZeros(h, start-off, stop); err != nil {
			return read, err
		}
		end = min(end, size)
		n, err := copyChunks(h, io.NewSectionReader(f, start, end-start), stop)
		read += n
		if err != nil {
			return read, err
		}
		off = end
	}
	return read, nil
}
