package linux

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Tree is a directory tree written in place of whoever else writes it: every path is
// resolved below its root without following a symbolic link or crossing to another
// mount on the way (RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_XDEV), and
// the last component is never followed either. A link planted anywhere in the tree
// makes the operation fail; it never redirects it. Paths are slash-separated and
// relative to the root ("." is the root).
type Tree struct {
	root *os.File
}

// OpenTree opens dir, which must be a directory reached without links.
func OpenTree(dir string) (*Tree, error) {
	f, err := OpenDirNoLinks(dir)
	if err != nil {
		return nil, err
	}
	return &Tree{root: f}, nil
}

// Close releases the tree's root. A nil Tree is none: closing it does nothing.
func (t *Tree) Close() error {
	if t == nil {
		return nil
	}
	return t.root.Close()
}

// resolve opens rel below the tree's root with flags: no symbolic or magic link
// followed, no mount crossed, nothing outside the root. A path longer than the kernel
// takes in one call (PATH_MAX: a sandbox can make one, 2,000 levels deep) is opened
// a piece at a time, each piece below the directory the last one opened, so it is
// reached too, under the same rules.
func (t *Tree) resolve(rel string, flags uint64) (int, error) {
	dir := int(t.root.Fd())
	for len(rel) >= resolvePiece {
		cut := strings.LastIndexByte(rel[:resolvePiece], '/')
		if cut <= 0 {
			return -1, unix.ENAMETOOLONG // one name past the limit
		}
		fd, err := openBeneath(dir, rel[:cut], unix.O_PATH|unix.O_DIRECTORY)
		if dir != int(t.root.Fd()) {
			unix.Close(dir)
		}
		if err != nil {
			return -1, err
		}
		dir, rel = fd, rel[cut+1:]
	}
	fd, err := openBeneath(dir, rel, flags)
	if dir != int(t.root.Fd()) {
		unix.Close(dir)
	}
	return fd, err
}

// resolvePiece is the longest part of a path resolve hands the kernel at once, below
// PATH_MAX (4096, its terminating NUL included).
const resolvePiece = 4000

// openBeneath is openat2 of rel below dir, with resolve's rules.
func openBeneath(dir int, rel string, flags uint64) (int, error) {
	how := unix.OpenHow{Flags: flags | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV}
	for {
		fd, err := unix.Openat2(dir, rel, &how)
		if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}

// parent opens rel's parent directory and returns it with rel's last component.
func (t *Tree) parent(rel string) (int, string, error) {
	rel = path.Clean(rel)
	if rel == "." || rel == ".." || strings.HasPrefix(rel, "../") || path.IsAbs(rel) {
		return -1, "", fmt.Errorf("%q: not a path below the tree", rel)
	}
	fd, err := t.resolve(path.Dir(rel), unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return -1, "", fmt.Errorf("opening the directory of %s: %w", rel, err)
	}
	return fd, path.Base(rel), nil
}

// Lstat describes rel itself (a link is described, not followed); an error matching
// os.ErrNotExist when it is not there.
func (t *Tree) Lstat(rel string) (*unix.Stat_t, error) {
	var st unix.Stat_t
	if path.Clean(rel) == "." {
		return &st, unix.Fstat(int(t.root.Fd()), &st)
	}
	pfd, name, err := t.parent(rel)
	if err != nil {
		return nil, err
	}
	defer unix.Close(pfd)
	if err := unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, &os.PathError{Op: "lstat", Path: rel, Err: err}
	}
	return &st, nil
}

// Names lists the directory rel.
func (t *Tree) Names(rel string) ([]string, error) {
	fd, err := t.resolve(rel, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: rel, Err: err}
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	return f.Readdirnames(-1)
}

// Mkdir makes the directory rel (its parent must exist) with mode perm, owned by
// uid:gid when uid >= 0. An existing directory is left as it is.
func (t *Tree) Mkdir(rel string, perm uint32, uid, gid int) error {
	pfd, name, err := t.parent(rel)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	if err := unix.Mkdirat(pfd, name, perm&0o777); err != nil {
		if errors.Is(err, unix.EEXIST) {
			var st unix.Stat_t
			if unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
				return nil
			}
		}
		return &os.PathError{Op: "mkdir", Path: rel, Err: err}
	}
	// The new directory is opened before it is changed: whoever else writes the
	// tree may have put a link in its place since, which chmod by name follows.
	fd, err := unix.Openat(pfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: rel, Err: err}
	}
	defer unix.Close(fd)
	if uid >= 0 {
		if err := unix.Fchown(fd, uid, gid); err != nil {
			return &os.PathError{Op: "chown", Path: rel, Err: err}
		}
	}
	// mkdir applied the umask; the mode asked for is the mode wanted.
	if err := unix.Fchmod(fd, perm&0o777); err != nil {
		return &os.PathError{Op: "chmod", Path: rel, Err: err}
	}
	return nil
}

// WriteFile replaces rel with a regular file holding what r gives, with mode perm
// (permission bits only: never set-id or sticky) owned by uid:gid when uid >= 0. The
// file is written under a temporary name beside rel and renamed over it, so rel is at
// every moment either what it was or the whole new file; a directory at rel is not
// replaced (an error).
func (t *Tree) WriteFile(rel string, r io.Reader, perm uint32, uid, gid int) error {
	return t.writeFile(rel, r, perm, uid, gid, nil)
}

// WriteFileFunc is [Tree.WriteFile] with the new file's content written by fill, at
// any offsets (a sparse file's data, its holes left as holes). When fill fails, rel
// is left as it was and fill's error is returned (wrapped: errors.Is finds it).
func (t *Tree) WriteFileFunc(rel string, perm uint32, uid, gid int, fill func(*os.File) error) error {
	return t.writeFile(rel, eof{}, perm, uid, gid, fill)
}

// eof is an empty reader.
type eof struct{}

func (eof) Read([]byte) (int, error) { return 0, io.EOF }

// writeFile is WriteFile, with finish (when not nil) run on the new file before it
// is renamed over rel.
func (t *Tree) writeFile(rel string, r io.Reader, perm uint32, uid, gid int, finish func(*os.File) error) error {
	return t.replace(rel, uid, gid, func(pfd int, tmp string) error {
		fd, err := unix.Openat(pfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return err
		}
		f := os.NewFile(uintptr(fd), tmp)
		defer f.Close()
		if err := copyData(f, r); err != nil {
			return err
		}
		if uid >= 0 {
			if err := f.Chown(uid, gid); err != nil {
				return err
			}
		}
		if err := f.Chmod(os.FileMode(perm & 0o777)); err != nil {
			return err
		}
		if finish != nil {
			return finish(f)
		}
		return nil
	})
}

// Overwrite replaces the content of the existing regular file rel in place, and
// makes its mode perm: the same inode, so a bind mount of it elsewhere (a Pod's
// subPath mount) shows the new content, as a new file renamed over it would not.
func (t *Tree) Overwrite(rel string, r io.Reader, perm uint32) error {
	fd, err := t.resolve(rel, unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		return &os.PathError{Op: "open", Path: rel, Err: err}
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &os.PathError{Op: "stat", Path: rel, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return &os.PathError{Op: "overwrite", Path: rel, Err: syscall.EEXIST}
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	if err := copyData(f, r); err != nil {
		return err
	}
	return f.Chmod(os.FileMode(perm & 0o777))
}

// Symlink replaces rel with a symbolic link to target, owned by uid:gid when uid >= 0.
func (t *Tree) Symlink(rel, target string, uid, gid int) error {
	return t.replace(rel, uid, gid, func(pfd int, tmp string) error {
		if err := unix.Symlinkat(target, pfd, tmp); err != nil {
			return err
		}
		if uid >= 0 {
			return unix.Fchownat(pfd, tmp, uid, gid, unix.AT_SYMLINK_NOFOLLOW)
		}
		return nil
	})
}

// Link replaces rel with a new name of the file old (both resolved below t, no link
// followed, old itself not followed either).
func (t *Tree) Link(old, rel string) error {
	ofd, oname, err := t.parent(old)
	if err != nil {
		return err
	}
	defer unix.Close(ofd)
	return t.replace(rel, -1, -1, func(pfd int, tmp string) error {
		return unix.Linkat(ofd, oname, pfd, tmp, 0)
	})
}

// replace makes rel's new content under a temporary name (make) and renames it over
// rel.
func (t *Tree) replace(rel string, uid, gid int, make func(pfd int, tmp string) error) error {
	pfd, name, err := t.parent(rel)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return &os.PathError{Op: "replace", Path: rel, Err: syscall.EISDIR}
	}
	var tmp string
	for i := 0; ; i++ {
		// A fresh name each try, made exclusively: a file of that name already
		// there is someone's, and is never touched.
		tmp = fmt.Sprintf(".cordon-apply-%d-%d", os.Getpid(), rand.Uint32())
		err = make(pfd, tmp)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EEXIST) || i == 10 {
			if !errors.Is(err, unix.EEXIST) {
				_ = unix.Unlinkat(pfd, tmp, 0)
			}
			return &os.PathError{Op: "write", Path: rel, Err: err}
		}
	}
	if err := unix.Renameat(pfd, tmp, pfd, name); err != nil {
		_ = unix.Unlinkat(pfd, tmp, 0)
		return &os.PathError{Op: "rename", Path: rel, Err: err}
	}
	return nil
}

// Remove removes rel: a file, a link or an empty directory. A missing rel is no error.
func (t *Tree) Remove(rel string) error {
	pfd, name, err := t.parent(rel)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return &os.PathError{Op: "lstat", Path: rel, Err: err}
	}
	flags := 0
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		flags = unix.AT_REMOVEDIR
	}
	if err := unix.Unlinkat(pfd, name, flags); err != nil && !errors.Is(err, unix.ENOENT) {
		return &os.PathError{Op: "remove", Path: rel, Err: err}
	}
	return nil
}

// Getxattr returns the value of the extended attribute name of rel itself (not what a
// link points to); "" and no error when rel has none by that name.
func Getxattr(p, name string) (string, error) {
	return getxattr(p, name, func(buf []byte) (int, error) { return unix.Lgetxattr(p, name, buf) })
}

// getxattr reads an extended attribute with get, growing the buffer as the value
// needs (up to 64 KiB): "" and no error when there is none; what names it in an error.
func getxattr(what, name string, get func([]byte) (int, error)) (string, error) {
	buf := make([]byte, 256)
	for {
		n, err := get(buf)
		switch {
		case errors.Is(err, unix.ENODATA) || errors.Is(err, unix.ENOTSUP):
			return "", nil
		case errors.Is(err, unix.ERANGE) && len(buf) < 1<<16:
			buf = make([]byte, 4*len(buf))
			continue
		case err != nil:
			return "", &os.PathError{Op: "getxattr", Path: what, Err: err}
		}
		return string(buf[:n]), nil
	}
}

// copyData copies r to the new file dst. A file's holes stay holes: a file of holes
// costs its writer nothing, and written out as zeros by root (who may use the blocks
// a file system keeps for it) it could fill the disk.
func copyData(dst *os.File, r io.Reader) error {
	src, ok := r.(*os.File)
	if !ok {
		return copyHoles(dst, r)
	}
	fi, err := src.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	if err := CopyExtents(dst, src, size); err != nil {
		return err
	}
	return dst.Truncate(size)
}

// holeBlock is the run of zeros copyHoles leaves a hole for: a file system's block.
const holeBlock = 4 << 10

var zeroHole [holeBlock]byte

// copyHoles copies r, a stream with no extents to ask (an archive's entry), to the
// new or emptied file dst: each holeBlock of zeros is seeked over, never written, and
// dst is then truncated to the whole size. A sparse archive entry (its holes read as
// zeros) lands as a sparse file, not as its size in zeros on the disk.
func copyHoles(dst *os.File, r io.Reader) error {
	buf := make([]byte, 64<<10)
	var off int64
	for {
		n := 0
		var err error
		for n < len(buf) && err == nil {
			var m int
			m, err = r.Read(buf[n:])
			n += m
		}
		if werr := writeData(dst, buf[:n], off); werr != nil {
			return werr
		}
		off += int64(n)
		if err == io.EOF {
			return dst.Truncate(off)
		}
		if err != nil {
			return err
		}
	}
}

// writeData writes b at off in dst, all but its blocks of zeros.
func writeData(dst *os.File, b []byte, off int64) error {
	for i := 0; i < len(b); {
		j := i
		for j < len(b) && !bytes.Equal(b[j:min(j+holeBlock, len(b))], zeroHole[:min(holeBlock, len(b)-j)]) {
			j += holeBlock
		}
		j = min(j, len(b))
		if j > i {
			if _, err := dst.WriteAt(b[i:j], off+int64(i)); err != nil {
				return err
			}
		}
		for j < len(b) && bytes.Equal(b[j:min(j+holeBlock, len(b))], zeroHole[:min(holeBlock, len(b)-j)]) {
			j += holeBlock
		}
		i = min(j, len(b))
	}
	return nil
}

// CopyExtents writes the data extents of src below to into dst at the same offsets,
// leaving dst's holes where src has its own.
func CopyExtents(dst, src *os.File, to int64) error {
	return DataExtents(src, 0, to, func(start, end int64) error {
		_, err := io.Copy(io.NewOffsetWriter(dst, start), io.NewSectionReader(src, start, end-start))
		return err
	})
}
