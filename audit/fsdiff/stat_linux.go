package fsdiff

import (
	"io/fs"
	"syscall"
)

// statKey is what must be unchanged for a file to be taken as unchanged without reading
// it. ctime cannot be set from user space, so a rewrite that restores mtime still shows.
type statKey struct {
	size         int64
	mtime, ctime int64 // nanoseconds since the epoch
	ino, dev     uint64
	mode         fs.FileMode
}

func keyOf(fi fs.FileInfo) statKey {
	k := statKey{size: fi.Size(), mtime: fi.ModTime().UnixNano(), mode: fi.Mode()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		k.ctime = st.Ctim.Nano()
		k.ino, k.dev = st.Ino, st.Dev
	}
	return k
}

// recent reports whether either timestamp is at or after t.
func (k statKey) recent(t int64) bool { return k.mtime >= t || k.ctime >= t }
