package linux

import (
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// The calls below read a directory tree the way fsdiff walks a workspace: each
// directory is opened relative to its parent's descriptor by one name, never following
// a symbolic link, and each entry is examined by name relative to that descriptor, so
// that nothing swapped in during the walk leads outside the tree. They use raw
// descriptors (no poller, no finalizer): a walk costs the system calls it makes, one
// lstat per entry and five per directory.

// Stat is what lstat reports of one entry.
type Stat struct {
	Mode         uint32 // st_mode: file type and permission bits
	Size         int64
	Mtime, Ctime int64 // nanoseconds since the epoch
	Ino, Dev     uint64
	Uid, Gid     uint32
	Nlink        uint64
}

func statOf(st *unix.Stat_t) Stat {
	return Stat{
		Mode: st.Mode, Size: st.Size,
		Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano(),
		Ino: st.Ino, Dev: st.Dev,
		Uid: st.Uid, Gid: st.Gid, Nlink: uint64(st.Nlink),
	}
}

// OpenDirPath opens the directory path (the top of a walk; links in path are
// followed, as the caller named it).
func OpenDirPath(path string) (int, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return fd, nil
}

// OpenDirAt opens the directory name of the directory dirfd, failing if it is a
// symbolic link or not a directory.
func OpenDirAt(dirfd int, name string) (int, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "openat", Path: name, Err: err}
	}
	return fd, nil
}

// OpenFileAt opens the file name of the directory dirfd for reading, without following
// a symbolic link and without blocking (a FIFO opens at once).
func OpenFileAt(dirfd int, name string) (*os.File, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, &os.PathError{Op: "openat", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), name), nil
}

// Lstatat is lstat of the entry name of the directory dirfd.
func Lstatat(dirfd int, name string) (Stat, error) {
	var st unix.Stat_t
	if err := lstatat(dirfd, name, &st); err != nil {
		return Stat{}, &os.PathError{Op: "lstat", Path: name, Err: err}
	}
	return statOf(&st), nil
}

// Fstat is fstat of the descriptor fd.
func Fstat(fd int) (Stat, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return Stat{}, &os.PathError{Op: "fstat", Path: ".", Err: err}
	}
	return statOf(&st), nil
}

// Readlinkat reads the target of the symbolic link name of the directory dirfd.
func Readlinkat(dirfd int, name string) (string, error) {
	for n := 256; ; n *= 2 {
		buf := make([]byte, n)
		got, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return "", &os.PathError{Op: "readlinkat", Path: name, Err: err}
		}
		if got < n {
			return string(buf[:got]), nil
		}
	}
}

// DirNames lists the directory fd (from its current offset), without "." and "..";
// buf is scratch space for the kernel's records.
func DirNames(fd int, buf []byte) ([]string, error) {
	var names []string
	err := EachDirName(fd, buf, func(batch []string) { names = append(names, batch...) })
	return names, err
}

// EachDirName lists the directory fd (from its current offset), without "." and "..",
// handing each getdents batch of names to fn (the slice is reused after fn returns), so
// that a caller can keep what it needs of a directory of any size; buf is scratch space
// for the kernel's records.
func EachDirName(fd int, buf []byte, fn func(batch []string)) error {
	var batch []string
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "getdents", Path: ".", Err: err}
		}
		if n <= 0 {
			return nil
		}
		_, _, batch = unix.ParseDirent(buf[:n], -1, batch[:0])
		fn(batch)
	}
}

// cNameMax is the room for a file name (NAME_MAX, 255 bytes) and its NUL.
const cNameMax = 256

// cName copies name into b with a NUL after it, for a system call that takes one
// name; false when it does not fit or holds a NUL itself (the caller then lets
// x/sys/unix convert it, which refuses the latter).
func cName(b *[cNameMax]byte, name string) bool {
	if len(name) >= len(b) || strings.IndexByte(name, 0) >= 0 {
		return false
	}
	copy(b[:], name)
	b[len(name)] = 0
	return true
}

// CloseFD closes the raw descriptor fd.
func CloseFD(fd int) { unix.Close(fd) }
