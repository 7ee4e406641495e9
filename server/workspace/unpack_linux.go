package workspace

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"syscall"

	"github.com/cordonhq/cordon/internal/linux"
)

// Unpack unpacks the tar archive r into the empty directory dir (reached without
// links, as named), bounded by lim, and returns how many entries and bytes it made.
// Everything made is owned by dir's owner. On a refused entry it returns an
// [EntryError] and leaves what it made so far (the caller removes the workspace).
//
// It writes WithoutReserve (internal/linux): the files are the tenant's, and the blocks
// of a tenant's disk reserved for root are for cordon's logs. A full disk is an
// [EntryError] of [ErrNoSpace].
func Unpack(r io.Reader, dir string, lim Limits) (st Stats, err error) {
	err = linux.WithoutReserve(func() (err error) {
		st, err = unpack(r, dir, lim, true, nil)
		return err
	})
	return st, err
}

// UnpackAsCaller is [Unpack] for a caller that writes its own files, as a Pod's
// process does (the workspace volume's root is the kubelet's, and the Pod may give
// nothing away): what it makes is the caller's, and its writes are not kept from any
// reserve (an unprivileged caller has none). dir need not be empty: a regular file
// at a path inPlace reports true for (nil: none) must exist already, and is written
// in place, its inode kept (a Pod's subPath mount binds it).
func UnpackAsCaller(r io.Reader, dir string, lim Limits, inPlace func(rel string) bool) (Stats, error) {
	return unpack(r, dir, lim, false, inPlace)
}

func unpack(r io.Reader, dir string, lim Limits, chown bool, inPlace func(string) bool) (Stats, error) {
	t, err := linux.OpenTree(dir)
	if err != nil {
		return Stats{}, err
	}
	defer t.Close()
	uid, gid := -1, -1
	if chown {
		if uid, gid, err = t.Owner(); err != nil {
			return Stats{}, err
		}
	}
	u := &unpacker{t: t, uid: uid, gid: gid, lim: lim, inPlace: inPlace}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return u.stats, nil
		}
		if err != nil {
			return u.stats, &EntryError{Entry: u.last, Reason: "after this entry: " + err.Error(), Err: ErrMalformed, Cause: err}
		}
		u.last = hdr.Name
		if err := u.entry(hdr, tr); err != nil {
			return u.stats, err
		}
	}
}

type unpacker struct {
	t        *linux.Tree
	uid, gid int
	lim      Limits
	stats    Stats
	last     string            // the last entry's name, for an error reading the next
	inPlace  func(string) bool // regular files written in place (nil: none)
}

// entry makes one entry of the archive.
func (u *unpacker) entry(hdr *tar.Header, body io.Reader) error {
	name := hdr.Name
	rel, err := cleanPath(name)
	if err != nil {
		return refused(name, "%v", err)
	}
	if hdr.Mode&(syscall.S_ISUID|syscall.S_ISGID|syscall.S_ISVTX) != 0 {
		return refused(name, "a set-user-ID, set-group-ID or sticky bit (mode %o)", hdr.Mode)
	}
	if rel == "." {
		if hdr.Typeflag == tar.TypeDir {
			return nil // the workspace itself: it is there, and keeps its own mode
		}
		return refused(name, "names the workspace itself")
	}
	if err := u.count(name); err != nil {
		return err
	}
	if err := u.parents(name, path.Dir(rel)); err != nil {
		return err
	}
	perm := uint32(hdr.Mode & 0o777)
	switch hdr.Typeflag {
	case tar.TypeDir:
		err = u.t.Mkdir(rel, perm, u.uid, u.gid)
	case tar.TypeReg:
		if hdr.Size > u.lim.Bytes-u.stats.Bytes {
			return tooLarge(name, "%d bytes; the archive may hold %d in all", hdr.Size, u.lim.Bytes)
		}
		b := &budget{r: body, left: u.lim.Bytes - u.stats.Bytes, n: &u.stats.Bytes}
		if u.inPlace != nil && u.inPlace(rel) {
			err = u.t.Overwrite(rel, b, perm)
		} else {
			err = u.t.WriteFile(rel, b, perm, u.uid, u.gid)
		}
		if errors.Is(err, errBudget) {
			return tooLarge(name, "past %d bytes in all", u.lim.Bytes)
		}
	case tar.TypeSymlink:
		if len(hdr.Linkname) > MaxPath || !linkStaysInside(rel, hdr.Linkname) {
			return refused(name, "a symbolic link to %q, which leaves the workspace", hdr.Linkname)
		}
		err = u.t.Symlink(rel, hdr.Linkname, u.uid, u.gid)
	case tar.TypeLink:
		err = u.hardLink(name, rel, hdr.Linkname)
	case tar.TypeChar, tar.TypeBlock:
		return refused(name, "a device")
	case tar.TypeFifo:
		return refused(name, "a FIFO")
	default:
		return refused(name, "an entry of type %q (only directories, regular files and links)", hdr.Typeflag)
	}
	if err != nil && !errors.Is(err, ErrRefused) {
		return u.failed(name, err)
	}
	return err
}

// count counts one more entry against the limit.
func (u *unpacker) count(name string) error {
	if u.stats.Entries >= u.lim.Entries {
		return tooLarge(name, "more than %d entries", u.lim.Entries)
	}
	u.stats.Entries++
	return nil
}

// parents makes the directories of dir the archive did not list (an archive may leave
// them out), each counted as an entry, or refuses when one is not a directory (a link
// the archive made, say: nothing is made through it).
func (u *unpacker) parents(name, dir string) error {
	if dir == "." {
		return nil
	}
	st, err := u.t.Lstat(dir)
	switch {
	case err == nil && st.Mode&syscall.S_IFMT == syscall.S_IFDIR:
		return nil
	case err == nil:
		return refused(name, "%s is not a directory (%s)", dir, typeName(st.Mode))
	case !errors.Is(err, fs.ErrNotExist):
		return u.failed(name, err)
	}
	if err := u.parents(name, path.Dir(dir)); err != nil {
		return err
	}
	if err := u.count(name); err != nil {
		return err
	}
	if err := u.t.Mkdir(dir, 0o755, u.uid, u.gid); err != nil {
		return u.failed(name, err)
	}
	return nil
}

// hardLink makes rel a new name of the regular file or symbolic link target, which
// an earlier entry made.
func (u *unpacker) hardLink(name, rel, target string) error {
	old, err := cleanPath(target)
	if err != nil || old == "." {
		return refused(name, "a hard link to %q, which is not an entry of the archive", target)
	}
	st, err := u.t.Lstat(old)
	if err != nil {
		return refused(name, "a hard link to %q, which is not an entry made before it", target)
	}
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFREG:
	case syscall.S_IFLNK:
		// The new name is the same link in another directory: its relative target
		// must stay inside from there too ("../../x" made two levels down climbs out
		// at the root).
		to, err := u.t.Readlink(old)
		if err != nil {
			return u.failed(name, err)
		}
		if !linkStaysInside(rel, to) {
			return refused(name, "a hard link to %q, a symbolic link to %q, which leaves the workspace from here", target, to)
		}
	default:
		return refused(name, "a hard link to %q, a %s", target, typeName(st.Mode))
	}
	return u.t.Link(old, rel)
}

// failed is the error of an operation on entry name that the file system refused:
// one the archive caused (a link on the way, a directory in a file's place, a name
// made twice as different types) is refused; any other is the server's.
func (u *unpacker) failed(name string, err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return &EntryError{Entry: name, Reason: err.Error(), Err: ErrNoSpace, Cause: err}
	}
	for _, e := range []error{syscall.ELOOP, syscall.EISDIR, syscall.EEXIST, syscall.ENOTDIR, syscall.EXDEV, syscall.ENOTEMPTY, syscall.EMLINK, syscall.ENAMETOOLONG, syscall.ENOENT} {
		if errors.Is(err, e) {
			return refused(name, "%v (a link or another entry on the way)", errors.Unwrap(err))
		}
	}
	return fmt.Errorf("unpacking %q: %w", name, err)
}

func typeName(mode uint32) string {
	switch mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		return "directory"
	case syscall.S_IFREG:
		return "regular file"
	case syscall.S_IFLNK:
		return "symbolic link"
	}
	return "special file"
}

// errBudget: a file's data passed the archive's byte limit.
var errBudget = errors.New("over the archive's byte limit")

// budget reads r, adding what it reads to *n, and fails past left bytes.
type budget struct {
	r    io.Reader
	left int64
	n    *int64
}

func (b *budget) Read(p []byte) (int, error) {
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.r.Read(p)
	if int64(n) > b.left {
		return 0, errBudget
	}
	b.left -= int64(n)
	*b.n += int64(n)
	return n, err
}
