//go:build linux || darwin

package linux

import (
	"errors"
	"fmt"
	"io"
	"os"
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
	uid  uint32
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
	var made Made
	defer made.Release()
	return made.make([]Placeholder{{Path: p, Dir: dir, Content: content}}, true)
}

// Made holds the entries [MakePlaceholders] made, each open, until Release: an entry
// removed from its name (by the workspace's writers) keeps its inode while it is held,
// so no entry made in its place has its identity (a file system such as ext4 gives a
// freed inode number to the next entry made, in the same tick of its birth clock), and
// an identity compared to one recorded while held (as [PlacePlaceholders]' are) tells
// the entry made from any other.
type Made struct {
	IDs []FileID // the identities of the entries made, in order
	fds []int
}

// Release closes what m holds.
func (m *Made) Release() {
	for _, fd := range m.fds {
		unix.Close(fd)
	}
	m.fds = nil
}

// Take moves what o holds to m: m releases it (o holds nothing more). Its IDs stay o's.
func (m *Made) Take(o *Made) {
	m.fds = append(m.fds, o.fds...)
	o.fds = nil
}

// Hold opens the entry at p, following no symbolic link on the way to it or at it,
// holds it in m until Release, and returns its identity, taken of what it opened: a
// placeholder another run made (adopted), held as one made is, so that no entry made
// at its path once it is removed has its identity while m holds it. A fifo or a device
// is opened without being read or waited for (holdFlags).
func (m *Made) Hold(p string) (FileID, error) {
	fd, e, err := openEntry(p)
	if err != nil {
		return FileID{}, err
	}
	m.fds = append(m.fds, fd)
	return e.id, nil
}

// openEntry opens the entry at p with holdFlags, following no symbolic link on the way
// to it or at it, and stats what it opened.
func openEntry(p string) (int, entry, error) {
	pfd, err := openParentNoLinks(p, false)
	if err != nil {
		return -1, entry{}, err
	}
	defer unix.Close(pfd)
	fd, err := unix.Openat(pfd, filepath.Base(p), holdFlags, 0)
	if err != nil {
		return -1, entry{}, err
	}
	e, err := statFd(fd)
	if err != nil {
		unix.Close(fd)
		return -1, entry{}, err
	}
	return fd, e, nil
}

// IdentifyEmpty returns the identity of the entry at p, as [Identify] does, and
// whether it is what an empty placeholder is: an empty directory or an empty regular
// file. Both are taken of one descriptor, opened as [Made.Hold] opens one: nothing is
// looked up twice, so an entry swapped in meanwhile (a fifo, a link, a device) is
// never read, waited on, or followed, and the identity is that of what was found
// empty.
func IdentifyEmpty(p string) (id FileID, empty bool, err error) {
	fd, e, err := openEntry(p)
	if err != nil {
		return FileID{}, false, err
	}
	defer unix.Close(fd)
	switch e.mode & unix.S_IFMT {
	case unix.S_IFREG:
		return e.id, e.size == 0, nil
	case unix.S_IFDIR:
		first, err := firstEntry(fd)
		return e.id, err == nil && first == "", err
	}
	return e.id, false, nil
}

// firstEntry is the name of an entry the directory open as fd (for reading, or a
// path only) holds, or "" when it holds none. fd stays open.
func firstEntry(fd int) (string, error) {
	dfd, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	f := os.NewFile(uintptr(dfd), ".")
	defer f.Close()
	switch names, err := f.Readdirnames(1); {
	case len(names) > 0:
		return names[0], nil
	case err != nil && err != io.EOF:
		return "", err
	}
	return "", nil
}

// MakePlaceholders creates ps in order, as [MakePlaceholder] does each but for their
// parents: a missing parent fails it (ENOENT), as one not made by this call, which has
// no identity for it, must not be (list each parent to make as a Placeholder with
// Parent set, before what it holds). It stops at the first that fails: made.IDs are
// the identities of those created, ps[:len(made.IDs)], taken of each entry made (what
// [RemovePlaceholders] removes), which made holds open until its Release (even when
// err is not nil). Each parent directory is opened once for all the placeholders it
// holds, by the same walk that follows no link; those descriptors are closed before
// it returns.
func MakePlaceholders(ps []Placeholder) (made *Made, err error) {
	made = &Made{}
	return made, made.make(ps, false)
}

// make makes ps into m, making missing parents when mkdir is set.
func (m *Made) make(ps []Placeholder, mkdir bool) error {
	dirs := parentDirs{mkdir: mkdir}
	defer dirs.close()
	for _, p := range ps {
		pfd, err := dirs.open(p.Path)
		if err != nil {
			return err
		}
		fd, id, err := makeAt(pfd, filepath.Base(p.Path), p.Dir || p.Parent, p.Parent, p.Content)
		if err != nil {
			// What was made and not known for this run's is left in place when the run
			// ends (aside: gc removes it by its name, when it is an empty placeholder).
			return err
		}
		m.IDs, m.fds = append(m.IDs, id), append(m.fds, fd)
	}
	return nil
}

// ErrMadeReplaced means a directory mkdir made was found replaced when it was opened
// to take its identity: not empty, or not this process's user's. What is at its name
// is not the placeholder made, and its identity is not recorded as one.
var ErrMadeReplaced = errors.New("the directory made was replaced before its identity was taken")

// makeAt creates the placeholder name in the directory pfd (a parent: see
// Placeholder.Parent) and returns its identity, taken of the entry made, never by a
// second look at its name: the workspace is another's to write, and the entry at the
// name may be replaced in between by one cordon must never record as its own (and
// then place, mount over, and remove). A file's is that of the descriptor that created
// it. mkdir gives no descriptor, so a directory is opened by its name once made, and
// taken for the one made only when it is one still empty and owned by this process's
// user: what another could have put there instead is an empty directory this user
// made, no more than what it could do to the one made (write in it, remove it).
func makeAt(pfd int, name string, dir, parent bool, content string) (fd int, id FileID, err error) {
	if dir {
		perm := uint32(0o700)
		if parent {
			perm = 0o755
		}
		if err := unix.Mkdirat(pfd, name, perm); err != nil {
			return -1, FileID{}, err
		}
		if madeHook != nil {
			madeHook(pfd, name)
		}
		return madeDir(pfd, name)
	}
	mode := uint32(0o600)
	if content != "" {
		mode = 0o644
	}
	fd, err = unix.Openat(pfd, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
	if err != nil {
		return -1, FileID{}, err
	}
	if content != "" {
		err = unix.Fchmod(fd, mode) // past the umask
		if err == nil {
			_, err = unix.Write(fd, []byte(content))
		}
	}
	if madeHook != nil {
		madeHook(pfd, name)
	}
	var e entry
	if err == nil {
		e, err = statFd(fd)
	}
	if err != nil {
		unix.Close(fd)
		return -1, FileID{}, err
	}
	return fd, e.id, nil
}

// madeDir opens the directory name in pfd that makeAt has just made, following no
// link, and returns it with its identity, or ErrMadeReplaced.
func madeDir(pfd int, name string) (int, FileID, error) {
	fd, err := unix.Openat(pfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, FileID{}, err
	}
	id, err := emptyOwnDir(fd)
	if err != nil {
		unix.Close(fd)
		return -1, FileID{}, err
	}
	return fd, id, nil
}

// emptyOwnDir returns the identity of the directory open as fd when it is empty and
// this process's user's, or ErrMadeReplaced. fd stays open.
func emptyOwnDir(fd int) (FileID, error) {
	e, err := statFd(fd)
	if err != nil {
		return FileID{}, err
	}
	if e.uid != uint32(os.Geteuid()) {
		return FileID{}, fmt.Errorf("%w: owned by uid %d, not %d (a file system that gives new entries another owner, such as NFS squashing root, is refused alike)", ErrMadeReplaced, e.uid, os.Geteuid())
	}
	switch first, err := firstEntry(fd); {
	case err != nil:
		return FileID{}, err
	case first != "":
		return FileID{}, fmt.Errorf("%w: it holds %q", ErrMadeReplaced, first)
	}
	return e.id, nil
}

// madeHook, when set (by tests), runs between the making of an entry and the taking
// of its identity.
var madeHook func(pfd int, name string)

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
