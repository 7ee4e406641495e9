//go:build linux || darwin

package linux

import (
	"errors"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Placeholder is a host entry cordon creates for a denied path that does not exist:
// the directory Path, or the file Path holding Content.
type Placeholder struct {
	Path    string
	Dir     bool
	Content string
	// Parent makes Path a directory made to hold placeholders, 0755 less the umask as
	// the parents made on the way are, rather than a placeholder directory (0700).
	Parent bool
	// ID is, for removal, the identity the entry had when it was made
	// ([MakePlaceholders]): an entry at Path with another identity is not removed. The
	// zero ID is no entry's: nothing is removed.
	ID FileID
	// Aside says, for removal, that Path is a name only its maker gives (one a
	// placeholder was made under before [PlacePlaceholders] gave it its own): an empty
	// placeholder there is removed whatever its identity, which may never have been
	// recorded.
	Aside bool
}

// FileID identifies one file system entry, whatever its path: its device and inode,
// and its birth time, which tells it from a later entry given the same inode number
// once it is gone. Where the file system keeps no birth time, a file's change time
// stands in (a placeholder file is not changed while cordon keeps it: the sandbox sees
// it read-only, and one the user changed is theirs), and a directory has none (its
// change time moves with every entry made or removed in it): device and inode alone
// then, which a directory made right after one removed may share.
type FileID struct {
	Dev    uint64 `json:"dev"`
	Ino    uint64 `json:"ino"`
	Birth  int64  `json:"birth,omitempty"`  // Unix nanoseconds
	Change int64  `json:"change,omitempty"` // Unix nanoseconds, without a birth time
}

// entry is what statAt reports of one directory entry.
type entry struct {
	mode uint32
	size int64
	id   FileID
}

// Identify returns the identity of the entry at p, following no symbolic link on the
// way to it or at it: one planted on the way fails it (ELOOP).
func Identify(p string) (FileID, error) {
	pfd, err := openParentNoLinks(p, false)
	if err != nil {
		return FileID{}, err
	}
	defer unix.Close(pfd)
	e, err := statAt(pfd, filepath.Base(p))
	return e.id, err
}

// MakePlaceholder creates the directory p, or the file p holding content, and its
// missing parents, following no symbolic link: a link planted on the way fails it
// (ELOOP) rather than create anything elsewhere. A file with content is world-readable
// (the tools that read it on the host may run as anyone); an empty one is 0600.
func MakePlaceholder(p string, dir bool, content string) error {
	_, err := makePlaceholders([]Placeholder{{Path: p, Dir: dir, Content: content}}, true)
	return err
}

// MakePlaceholders creates ps in order, as [MakePlaceholder] does each but for their
// parents: a missing parent fails it (ENOENT), as one not made by this call, which has
// no identity for it, must not be (list each parent to make as a Placeholder with
// Parent set, before what it holds). It stops at the first that fails: ids are the
// identities of those created, ps[:len(ids)], taken as each is made (what
// [RemovePlaceholders] removes). Each parent directory is opened once for all the
// placeholders it holds, by the same walk that follows no link; the descriptors are
// closed before it returns.
func MakePlaceholders(ps []Placeholder) (ids []FileID, err error) {
	return makePlaceholders(ps, false)
}

// makePlaceholders is MakePlaceholders, making missing parents when mkdir is set.
func makePlaceholders(ps []Placeholder, mkdir bool) (ids []FileID, err error) {
	dirs := parentDirs{mkdir: mkdir}
	defer dirs.close()
	for _, p := range ps {
		pfd, err := dirs.open(p.Path)
		if err != nil {
			return ids, err
		}
		name := filepath.Base(p.Path)
		if err := makeAt(pfd, name, p.Dir || p.Parent, p.Parent, p.Content); err != nil {
			return ids, err
		}
		e, err := statAt(pfd, name)
		if err != nil {
			// Made, but not known for this run's: left in place when the run ends.
			return ids, err
		}
		ids = append(ids, e.id)
	}
	return ids, nil
}

// makeAt creates the placeholder name in the directory pfd (a parent: see
// Placeholder.Parent).
func makeAt(pfd int, name string, dir, parent bool, content string) error {
	switch {
	case parent:
		return unix.Mkdirat(pfd, name, 0o755)
	case dir:
		return unix.Mkdirat(pfd, name, 0o700)
	}
	mode := uint32(0o600)
	if content != "" {
		mode = 0o644
	}
	fd, err := unix.Openat(pfd, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
	if err != nil {
		return err
	}
	if content != "" {
		if err := unix.Fchmod(fd, mode); err != nil { // past the umask
			unix.Close(fd)
			return err
		}
		if _, err := unix.Write(fd, []byte(content)); err != nil {
			unix.Close(fd)
			return err
		}
	}
	return unix.Close(fd)
}

// PlacePlaceholders gives each entry made aside (by [MakePlaceholders] at
// aside[i].Path, a name in the directory of ps[i].Path) the name ps[i].Path, following
// no symbolic link on the way, and never over anything: what is at ps[i].Path then
// stays, and that placement fails (fs.ErrExist). It returns one error per entry, and
// the identity of what is at ps[i].Path once it is placed (zero when that placement
// failed, or the look after it did): where the file system keeps no birth time, the
// rename has set a file's change time, which is then part of its identity. A caller
// that records the identities of the entries made aside before placing them never
// has an entry at a placeholder's path that it made but could not prove it made.
func PlacePlaceholders(aside, ps []Placeholder) (ids []FileID, errs []error) {
	ids, errs = make([]FileID, len(ps)), make([]error, len(ps))
	dirs := parentDirs{}
	defer dirs.close()
	for i, p := range ps {
		if filepath.Dir(aside[i].Path) != filepath.Dir(p.Path) {
			errs[i] = unix.EXDEV
			continue
		}
		pfd, err := dirs.open(p.Path)
		if err == nil {
			err = renameNoReplace(pfd, filepath.Base(aside[i].Path), filepath.Base(p.Path))
		}
		if errs[i] = err; err == nil {
			if e, err := statAt(pfd, filepath.Base(p.Path)); err == nil {
				ids[i] = e.id
			}
		}
	}
	return ids, errs
}

// parentDirs holds the parent directories of one batch of placeholders, each opened
// once by openParentNoLinks (no symbolic link followed on the way) and closed by
// close. A descriptor is the directory the walk reached, whatever is renamed or
// planted at its path afterwards; it is kept for one batch only, so a parent replaced
// by a link between two batches (two runs) is walked afresh, and refused.
type parentDirs struct {
	mkdir bool
	fds   map[string]int
}

// open returns the descriptor of p's parent directory, opening it the first time.
func (d *parentDirs) open(p string) (int, error) {
	dir := filepath.Dir(p)
	if fd, ok := d.fds[dir]; ok {
		return fd, nil
	}
	fd, err := openParentNoLinks(p, d.mkdir)
	if err != nil {
		return -1, err
	}
	if d.fds == nil {
		d.fds = map[string]int{}
	}
	d.fds[dir] = fd
	return fd, nil
}

func (d *parentDirs) close() {
	for _, fd := range d.fds {
		unix.Close(fd)
	}
}

// Errors of [RemovePlaceholders]: what is at a placeholder's path is left in place.
var (
	// ErrNotPlaceholder means the entry is the one made, but no longer an empty file
	// (or one holding exactly its content) or directory.
	ErrNotPlaceholder = errors.New("no longer an empty placeholder")
	// ErrReplaced means the entry is not the one made (Placeholder.ID): another took
	// its path, or it was never made.
	ErrReplaced = errors.New("not the placeholder cordon made")
)

// RemovePlaceholder removes p if it is still the entry id (made by [MakePlaceholders])
// and a regular file holding exactly content or an empty directory, following no
// symbolic link (one planted on the way, or at p, is left alone). A p that is gone is
// no error.
func RemovePlaceholder(p, content string, id FileID) error {
	return RemovePlaceholders([]Placeholder{{Path: p, Content: content, ID: id}})[0]
}

// RemovePlaceholders removes each of ps in order as [RemovePlaceholder] does (Dir is
// not looked at: what is there decides), and returns one error per placeholder, nil
// for each removed or gone. Each parent directory is opened once for all the
// placeholders it holds, by the same walk that follows no link, and the identity is
// checked in it, on the entry it would unlink.
func RemovePlaceholders(ps []Placeholder) []error {
	errs := make([]error, len(ps))
	dirs := parentDirs{}
	defer dirs.close()
	for i, p := range ps {
		pfd, err := dirs.open(p.Path)
		if err == nil {
			err = removeAt(pfd, filepath.Base(p.Path), p.Content, p.ID, p.Aside)
		}
		if errors.Is(err, unix.ENOENT) {
			err = nil
		}
		errs[i] = err
	}
	return errs
}

// removeAt removes name in the directory pfd if it is still the entry id (any, when
// aside) and a regular file holding exactly content or an empty directory.
func removeAt(pfd int, name, content string, id FileID, aside bool) error {
	st, err := statAt(pfd, name)
	if err != nil {
		return err
	}
	if !aside && (st.id != id || id == (FileID{})) {
		return ErrReplaced
	}
	switch st.mode & unix.S_IFMT {
	case unix.S_IFREG:
		if st.size != int64(len(content)) || !holds(pfd, name, content) {
			return ErrNotPlaceholder
		}
		return unix.Unlinkat(pfd, name, 0)
	case unix.S_IFDIR:
		return unix.Unlinkat(pfd, name, unix.AT_REMOVEDIR) // ENOTEMPTY when it is not empty
	}
	return ErrNotPlaceholder
}

// holds reports whether the file name in directory dfd holds exactly content.
func holds(dfd int, name, content string) bool {
	if content == "" {
		return true // the size said so
	}
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	buf := make([]byte, len(content)+1)
	n, _ := unix.Read(fd, buf)
	return string(buf[:max(n, 0)]) == content
}
