//go:build !linux

package fsdiff

import (
	"hash"
	"io"
	"os"
)

// hashFrom writes the content of f from off to size into h and returns the bytes it
// read (holes included: this GOOS has no SEEK_DATA here). stop is checked between
// chunks; when it says so, hashFrom gives up with errStopped.
func hashFrom(f *os.File, h hash.Hash, off, size int64, stop func() bool) (int64, error) {
	return copyChunks(h, io.NewSectionReader(f, off, size-off), stop)
}
