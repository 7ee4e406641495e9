package fsdiff

import (
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
)

// fdDir is a directory of the workspace as a raw descriptor: a walk then makes one
// lstat per entry and five system calls per directory (open, fstat, two getdents,
// close), with no poller or finalizer (internal/linux walk_linux.go).
type fdDir struct{ fd int }

func openTop(dir string) (dirHandle, error) {
	fd, err := linux.OpenDirPath(dir)
	if err != nil {
		return nil, err
	}
	return fdDir{fd}, nil
}

// direntBufs holds getdents buffers, so that a walk does not allocate (and clear)
// one per directory.
var direntBufs = sync.Pool{New: func() any { return new([16 << 10]byte) }}

func (d fdDir) names(keep int) ([]string, int, error) {
	buf := direntBufs.Get().(*[16 << 10]byte)
	s := smallest{keep: keep}
	err := linux.EachDirName(d.fd, buf[:], s.offer)
	direntBufs.Put(buf)
	return s.sorted(), s.total, err
}

func (d fdDir) lstat(name string) (fs.FileInfo, error) {
	st, err := linux.Lstatat(d.fd, name)
	if err != nil {
		return nil, err
	}
	return &statInfo{name: name, st: st}, nil
}

func (d fdDir) stat() (fs.FileInfo, error) {
	st, err := linux.Fstat(d.fd)
	if err != nil {
		return nil, err
	}
	return &statInfo{name: ".", st: st}, nil
}

func (d fdDir) sub(name string) (dirHandle, error) {
	fd, err := linux.OpenDirAt(d.fd, name)
	if err != nil {
		return nil, err
	}
	return fdDir{fd}, nil
}

func (d fdDir) open(name string) (*os.File, error) { return linux.OpenFileAt(d.fd, name) }

func (d fdDir) readlink(name string) (string, error) { return linux.Readlinkat(d.fd, name) }

func (d fdDir) close() { linux.CloseFD(d.fd) }

// statInfo is an fs.FileInfo made from a raw lstat, with the mode os.Lstat would
// report.
type statInfo struct {
	name string
	st   linux.Stat
}

func (i *statInfo) Name() string       { return i.name }
func (i *statInfo) Size() int64        { return i.st.Size }
func (i *statInfo) ModTime() time.Time { return time.Unix(0, i.st.Mtime) }
func (i *statInfo) IsDir() bool        { return i.Mode().IsDir() }
func (i *statInfo) Sys() any           { return &i.st }

// Unix file types and mode bits (as in <sys/stat.h>).
const (
	sIFMT   = 0o170000
	sIFBLK  = 0o060000
	sIFCHR  = 0o020000
	sIFDIR  = 0o040000
	sIFIFO  = 0o010000
	sIFLNK  = 0o120000
	sIFSOCK = 0o140000
	sISUID  = 0o4000
	sISGID  = 0o2000
	sISVTX  = 0o1000
)

func (i *statInfo) Mode() fs.FileMode {
	m := fs.FileMode(i.st.Mode & 0o777)
	switch i.st.Mode & sIFMT {
	case sIFBLK:
		m |= fs.ModeDevice
	case sIFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case sIFDIR:
		m |= fs.ModeDir
	case sIFIFO:
		m |= fs.ModeNamedPipe
	case sIFLNK:
		m |= fs.ModeSymlink
	case sIFSOCK:
		m |= fs.ModeSocket
	}
	if i.st.Mode&sISUID != 0 {
		m |= fs.ModeSetuid
	}
	if i.st.Mode&sISGID != 0 {
		m |= fs.ModeSetgid
	}
	if i.st.Mode&sISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}

func (d fdDir) xattrNames(name string) ([]string, error) { return linux.ListxattrAt(d.fd, name) }

func (d fdDir) xattrValue(name, attr string) ([]byte, error) {
	return linux.GetxattrAt(d.fd, name, attr)
}
