//go:build !linux

package fsdiff

import (
	"io/fs"
	"os"

	"github.com/cordonhq/cordon/internal/gitread"
)

// statKey is what must be unchanged for a file to be taken as unchanged without reading
// it. Outside Linux only the portable fields are used.
type statKey struct {
	size  int64
	mtime int64 // nanoseconds since the epoch
	mode  fs.FileMode
}

func keyOf(fi fs.FileInfo) statKey {
	return statKey{size: fi.Size(), mtime: fi.ModTime().UnixNano(), mode: fi.Mode()}
}

// recent reports whether the modification time is at or after t.
func (k statKey) recent(t int64) bool { return k.mtime >= t }

// matchesIndex is false outside Linux: without ctime and the inode a stat match
// proves too little, so every tracked file is read.
func (k statKey) matchesIndex(gitread.Entry) bool { return false }

// alias is k: outside Linux keys hold no device.
func (k statKey) alias([2]uint64) statKey { return k }

// devOf is 0 outside Linux.
func devOf(fs.FileInfo) uint64 { return 0 }

// sameFile is os.SameFile outside Linux (the walk's entries come from os there).
func sameFile(a, b fs.FileInfo) bool { return os.SameFile(a, b) }

// links is 0 outside Linux: unknown.
func links(fs.FileInfo) uint64 { return 0 }

// fileID is zero outside Linux, where keys hold no inode: a watched diff walks.
func (k statKey) fileID() [2]uint64 { return [2]uint64{} }
