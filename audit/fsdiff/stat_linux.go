package fsdiff

import (
	"io/fs"
	"syscall"

	"github.com/cordonhq/cordon/internal/gitread"
	"github.com/cordonhq/cordon/internal/linux"
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
	switch st := fi.Sys().(type) {
	case *linux.Stat: // the walk's (dir_linux.go)
		k.ctime, k.ino, k.dev = st.Ctime, st.Ino, st.Dev
	case *syscall.Stat_t: // os.Stat's
		k.ctime = st.Ctim.Nano()
		k.ino, k.dev = st.Ino, st.Dev
	}
	return k
}

// links is fi's number of hard links (0 when unknown).
func links(fi fs.FileInfo) uint64 {
	switch st := fi.Sys().(type) {
	case *linux.Stat:
		return st.Nlink
	case *syscall.Stat_t:
		return uint64(st.Nlink)
	}
	return 0
}

// sameFile reports whether a and b (from the walk or from os) are the same file.
func sameFile(a, b fs.FileInfo) bool {
	ka, kb := keyOf(a), keyOf(b)
	return ka.ino == kb.ino && ka.dev == kb.dev && (ka.ino != 0 || ka.dev != 0)
}

// recent reports whether either timestamp is at or after t.
func (k statKey) recent(t int64) bool { return k.mtime >= t || k.ctime >= t }

// matchesIndex reports whether the stat data git recorded in an index entry are those
// of the file with key k, as git compares them (ctime, mtime, inode and size, the
// latter two truncated to 32 bits as git stores them; not the device, which git leaves
// out by default).
func (k statKey) matchesIndex(ie gitread.Entry) bool {
	sec := func(ns int64) uint32 { return uint32(ns / 1e9) }
	nsec := func(ns int64) uint32 { return uint32(ns % 1e9) }
	return k.mtime >= 0 && k.ctime >= 0 &&
		ie.MtimeSec == sec(k.mtime) && ie.MtimeNsec == nsec(k.mtime) &&
		ie.CtimeSec == sec(k.ctime) && ie.CtimeNsec == nsec(k.ctime) &&
		ie.Ino == uint32(k.ino) && ie.Size == uint32(k.size) &&
		(ie.Mode == 0o100755) == (k.mode&0o100 != 0)
}

// alias is k with the device a[0] taken for a[1] (Options.devAlias).
func (k statKey) alias(a [2]uint64) statKey {
	if a[0] != 0 && k.dev == a[0] {
		k.dev = a[1]
	}
	return k
}

// devOf is fi's device.
func devOf(fi fs.FileInfo) uint64 { return keyOf(fi).dev }

// fileID is the device and inode of k's file.
func (k statKey) fileID() [2]uint64 { return [2]uint64{k.dev, k.ino} }
