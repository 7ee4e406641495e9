package layer

import (
	"errors"
	"math"
	"path"
	"slices"
	"strings"
	"syscall"

	"github.com/cordonhq/cordon/internal/linux"
)

// A rollback that undoes the removal of a workspace directory (one whiteout in the
// upper directory) cannot take the whiteout away: the upper directory is never
// changed behind the mounted overlay's back, and processes of the session run on
// through the rollback. It makes the directory anew through the overlay instead: an
// opaque directory of the upper directory, holding a copy of each of the workspace's
// entries, which shows what the workspace shows there. Counted entry by entry, it
// would take the session past limits.diff.entries although the workspace is back at a
// checkpoint that held one whiteout; listed, it would land every file again.
//
// The readers of a staged session's upper directory (Read, TakeCheckpoint,
// UpperPaths, Checkpoint.Unchanged) take an opaque directory that is such a copy, as
// they read it, as what it is: no change. A copy is exact: the same names, types and
// permission bits, no set-id bits, the same extended attributes, names and values
// (the overlay's opaque mark on a directory aside: a rollback restores them), the
// same link targets, and files of the same bytes (at most sameMax each) and
// modification time. Anything else the sandbox wrote in it (one byte, one
// name, one attribute, a touch) makes it a change again, listed and counted in full,
// as before. Apply lands only what Apply's Read lists, after the run has ended: what
// it leaves out is, at that moment, what the workspace holds already.

// copyBytesMax is the most one call of a reader of the upper directory reads of
// files, both sides counted, to tell copies (lowerView).
const copyBytesMax = 1 << 30

// copyOf reports whether the entry name of the upper directory up, a directory at
// rel, is an exact copy of the workspace's directory rel (lower: nil, none is taken
// as one). What it reads is taken from lower's budget; past it, it is not a copy.
func copyOf(up *linux.Dir, name, rel string, lower *lowerView) bool {
	dir := path.Dir(rel)
	if lower == nil || !lower.mergedAt(dir) || !lower.walk(dir) {
		return false
	}
	lo, err := lower.t.OpenDir(dir)
	if err != nil {
		return false
	}
	defer lo.Close()
	return sameEntry(up, lo, name, lower)
}

// sameEntry reports whether the entry name of up is an exact copy of lo's, what it
// reads taken from b.
func sameEntry(up, lo *linux.Dir, name string, b *lowerView) bool {
	us, err := up.Lstat(name)
	if err != nil {
		return false
	}
	ls, err := lo.Lstat(name)
	if err != nil {
		return false
	}
	// The type and the permission bits, and no set-id or sticky bit in the copy
	// (Apply never lands them; the workspace's own are kept).
	if us.Mode&(syscall.S_IFMT|0o7777) != ls.Mode&(syscall.S_IFMT|0o777) || !sameAttrs(up, lo, name, us.Mode, b) {
		return false
	}
	switch us.Mode & syscall.S_IFMT {
	case syscall.S_IFREG:
		// One name only: a file the sandbox also linked elsewhere in the upper
		// directory is one file of many names there, which a checkpoint must hold
		// whole (skipped here, it would hold the other names alone, and a rollback
		// to it would split the file).
		if us.Nlink != 1 || us.Size != ls.Size || us.Mtim != ls.Mtim || !b.spend(0, 2*us.Size) {
			return false
		}
		return sameFileOf(up, lo, name)
	case syscall.S_IFLNK:
		a, err1 := up.Readlink(name)
		b, err2 := lo.Readlink(name)
		return err1 == nil && err2 == nil && a == b
	case syscall.S_IFDIR:
		return sameDir(up, lo, name, b)
	}
	return false
}

// mergedAt reports whether the overlay shows the workspace's directory dir merged
// with the upper directory's: no directory on the way to it, itself included, is
// opaque in the upper directory. Below an opaque one the workspace's entries are
// hidden, and a copy of one there is no copy of what the overlay shows: it is the
// only thing there (a checkpoint that skipped it would hold its parent without it,
// and a rollback to that checkpoint would remove it).
//
// Each directory is opened once per reader call (its answer is kept), by its path
// from the upper directory's root: a walk of as many names as it is deep, taken from
// b's budget of steps (walk). So the sandbox's opaque directories below chains of its own
// (thousands of levels deep, PATH_MAX allows) cost the host no more than the budget,
// however many there are: past it, nothing more is a copy.
func (b *lowerView) mergedAt(dir string) bool {
	if dir == "." || dir == "/" {
		return true
	}
	if m, ok := b.merged[dir]; ok {
		return m
	}
	m := b.mergedAt(path.Dir(dir)) && b.walk(dir) && b.notOpaque(dir)
	if b.merged == nil {
		b.merged = map[string]bool{}
	}
	b.merged[dir] = m
	return m
}

// notOpaque reports whether the upper directory's directory dir is there and not
// opaque.
func (b *lowerView) notOpaque(dir string) bool {
	d, err := b.up.OpenDir(dir)
	if err != nil {
		return false
	}
	defer d.Close()
	v, err := d.Getxattr(xattrOpaque)
	return err == nil && v != "y"
}

// walk takes from b the names that opening the relative path p walks, and reports
// whether b had them.
func (b *lowerView) walk(p string) bool {
	b.steps -= strings.Count(p, "/") + 1
	return b.steps >= 0
}

// spend takes entries names and n bytes from b, and reports whether b had them.
func (b *lowerView) spend(entries int, n int64) bool {
	b.entries -= entries
	b.bytes -= n
	return b.entries >= 0 && b.bytes >= 0
}

// sameAttrs reports whether the entry name of up, of mode mode, has the extended
// attributes of lo's, names and values, but for the overlay's opaque mark on a
// directory, what it reads taken from b. An attribute of the workspace's that the
// copy lacked would be taken away by an apply that lands the copy, and one of the
// copy's that the workspace lacks would be left out of the workspace by an apply
// that takes the copy for no change, although the sandbox sees it: a rollback
// restores want's attributes, so a directory it makes anew is a copy with them.
// An entry of more of them than are read (xattrNamesMax, xattrBytesMax) is no copy.
func sameAttrs(up, lo *linux.Dir, name string, mode uint32, b *lowerView) bool {
	ua, n, err := up.Xattrs(name, xattrNamesMax, xattrBytesMax)
	if !b.spend(0, int64(n)) || err != nil {
		return false
	}
	la, n, err := lo.Xattrs(name, xattrNamesMax, xattrBytesMax)
	if !b.spend(0, int64(n)) || err != nil {
		return false
	}
	if mode&syscall.S_IFMT == syscall.S_IFDIR {
		ua = slices.DeleteFunc(ua, func(a linux.Xattr) bool { return a.Name == xattrOpaque })
	}
	return slices.Equal(ua, la)
}

// sameFileOf reports whether the regular files name of up and lo hold the same bytes.
func sameFileOf(up, lo *linux.Dir, name string) bool {
	a, err := up.Open(name)
	if err != nil {
		return false
	}
	defer a.Close()
	b, err := lo.Open(name)
	if err != nil {
		return false
	}
	defer b.Close()
	return sameBytes(a, b)
}

// sameDir reports whether the directories name of up and lo hold the same names, each
// an exact copy.
func sameDir(up, lo *linux.Dir, name string, b *lowerView) bool {
	su, err := up.Sub(name)
	if err != nil {
		return false
	}
	defer su.Close()
	sl, err := lo.Sub(name)
	if err != nil {
		return false
	}
	defer sl.Close()
	un, ok := namesWithin(su, b)
	if !ok {
		return false
	}
	ln, ok := namesWithin(sl, b)
	if !ok || len(ln) != len(un) {
		return false
	}
	slices.Sort(un)
	slices.Sort(ln)
	if !slices.Equal(un, ln) {
		return false
	}
	for _, n := range un {
		if !sameEntry(su, sl, n, b) {
			return false
		}
	}
	return true
}

// namesWithin lists d's names, a batch at a time, taking them from b: false past it.
func namesWithin(d *linux.Dir, b *lowerView) ([]string, bool) {
	var names []string
	err := d.EachNames(namesBatch, func(batch []string) error {
		names = append(names, batch...)
		if !b.spend(len(batch), 0) {
			return errCopyBudget
		}
		return nil
	})
	return names, err == nil
}

// errCopyBudget ends a listing past a lowerView's budget.
var errCopyBudget = errors.New("past the budget for telling copies")

// isCopy is copyOf for an opaque directory: one merged with the workspace's is read
// entry by entry, as the overlay holds it.
func isCopy(up *linux.Dir, name, rel string, lower *lowerView) bool {
	if lower == nil {
		return false
	}
	sub, err := up.Sub(name)
	if err != nil {
		return false
	}
	v, err := sub.Getxattr(xattrOpaque)
	sub.Close()
	return err == nil && v == "y" && copyOf(up, name, rel, lower)
}

// openLower opens the workspace for a reader of the upper directory up that reads at
// most max entries (limits.diff.entries; 0: no bound): nil (closing it does nothing)
// for "", or for one that cannot be opened (a discard after the workspace went): with
// nothing to compare with, every entry is counted and listed.
func openLower(workspace string, up *linux.Tree, max int) *lowerView {
	if workspace == "" {
		return nil
	}
	t, err := linux.OpenTree(workspace)
	if err != nil {
		return nil
	}
	names := math.MaxInt
	if max > 0 && max < math.MaxInt/2 {
		names = 2 * max
	}
	return &lowerView{t: t, up: up, entries: names, bytes: copyBytesMax, steps: names}
}

// Close closes the workspace; a nil view closes nothing.
func (b *lowerView) Close() {
	if b != nil {
		b.t.Close()
	}
}
