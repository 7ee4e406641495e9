package layer

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"

	"github.com/cordonhq/cordon/internal/linux"
)

// Rollback makes live (a staged session's merged workspace: the mounted overlay,
// which the sandbox may be writing at the same time) show at every path what want
// shows there (a checkpoint over the workspace, cordon's own read-only view). Only
// the paths an upper directory names can differ between the two, so paths (those of
// the live upper directory and of the checkpoint) are where it looks, and the
// entries of each directory among them. Every write goes through live, following no
// link (see [linux.Tree]); what it writes is uid:gid's, without set-id bits, files
// with want's modification time, and every entry it reaches (a special file aside)
// with want's extended attributes (one it cannot set, or an entry of more than it
// reads, is a problem; see restoreAttrs). Files
// in same are known to be what they were at the checkpoint (Checkpoint.Unchanged) and
// are not read. It returns the paths it changed, and what want holds that it cannot
// restore. A directory it lists, on either side, holds at most max entries
// (limits.diff.entries; 0: no bound), and one it removes at most max in all: past
// that, it is left as it is and named in the problems (the sandbox may fill a
// directory of live while this reads it), and the rest is restored.
func Rollback(live, want *linux.Tree, paths []string, same map[string]bool, uid, gid, max int) (changed []string, problems []Problem, err error) {
	rb := &rollback{live: live, want: want, uid: uid, gid: gid, max: max, named: map[string]bool{}, written: map[[2]uint64]string{}}
	sort.Strings(paths)
	for _, p := range paths {
		rb.named[p] = true
	}
	for _, p := range paths {
		if same[p] {
			continue
		}
		if err := rb.sync(p); err != nil {
			return rb.changed, rb.problems, err
		}
	}
	return rb.changed, rb.problems, nil
}

type rollback struct {
	live, want *linux.Tree
	uid, gid   int
	max        int // entries of one directory listed or removed (limits.diff.entries)
	named      map[string]bool
	// written is, for a file of want of many names, the live path it was last written
	// to: its other names are made links to it, so that a file of many names costs one
	// write, not one per name.
	written  map[[2]uint64]string // by device and inode
	changed  []string
	problems []Problem
}

// sync makes live hold at p what want holds there. A directory past the bound on
// either side (the sandbox may be filling one of live as this runs) is left as it
// is and named in the problems, and the rest goes on: the rollback is not left half
// done for it.
func (rb *rollback) sync(p string) error {
	before := len(rb.changed)
	err := rb.syncOne(p)
	if err == nil {
		rb.restoreAttrs(p, before)
	}
	if errors.Is(err, ErrTooMany) {
		rb.problems = append(rb.problems, Problem{p, "not restored: " + err.Error()})
		return nil
	}
	return err
}

// syncOne is sync without its handling of a directory past the bound.
func (rb *rollback) syncOne(p string) error {
	var wMode, lMode uint32 // 0: nothing there, or not reached without a link
	var wTime, lTime int64  // modification times
	if w, err := rb.want.Lstat(p); err == nil {
		wMode, wTime = w.Mode, w.Mtim.Nano()
	}
	if l, err := rb.live.Lstat(p); err == nil {
		lMode, lTime = l.Mode, l.Mtim.Nano()
	}
	wType, lType := wMode&syscall.S_IFMT, lMode&syscall.S_IFMT
	switch wType {
	case 0:
		if lType == 0 {
			return nil
		}
		return rb.did(p, removeAll(rb.live, p, rb.max))
	case syscall.S_IFDIR:
		return rb.syncDir(p, wMode, lMode)
	case syscall.S_IFREG:
		// The modification time too: make and build caches read it, and a file of
		// another is no copy of the workspace's (copyOf).
		if lType == syscall.S_IFREG && lMode&0o777 == wMode&0o777 && lTime == wTime && rb.sameContent(p) {
			return nil
		}
		return rb.did(p, rb.writeNamed(p, wMode, lType))
	case syscall.S_IFLNK:
		target, err := rb.want.Readlink(p)
		if err != nil {
			return err
		}
		if lType == syscall.S_IFLNK {
			if now, err := rb.live.Readlink(p); err == nil && now == target {
				return nil
			}
		}
		if lType == syscall.S_IFDIR {
			if err := removeAll(rb.live, p, rb.max); err != nil {
				return err
			}
		}
		return rb.did(p, rb.live.Symlink(p, target, rb.uid, rb.gid))
	}
	rb.problems = append(rb.problems, Problem{p, "a special file: not restored"})
	return nil
}

// maxAttrProblems is how many of one entry's attributes a rollback names in its
// problems; the rest are counted in one more.
const maxAttrProblems = 4

// restoreAttrs gives live's p, which syncOne made what want holds at p (before:
// len(rb.changed) when it began), want's extended attributes: it sets those live's
// lacks or holds with other values, and removes those want's lacks, the overlay's
// own aside on both sides (see entryAttrs). Each it cannot set or remove is a
// problem, and so is an entry of want of more than it reads (xattrNamesMax,
// xattrBytesMax): none of its attributes is then restored. p is changed if an
// attribute is.
func (rb *rollback) restoreAttrs(p string, before int) {
	w, err := rb.want.Lstat(p)
	if err != nil {
		return // nothing there: syncOne removed live's p
	}
	switch w.Mode & syscall.S_IFMT {
	case syscall.S_IFREG, syscall.S_IFDIR, syscall.S_IFLNK:
	default:
		return // a special file: not restored (a problem already)
	}
	want, _, err := rb.want.Xattrs(p, xattrNamesMax, xattrBytesMax)
	if err != nil {
		rb.problems = append(rb.problems, Problem{p, "extended attributes not restored: " + err.Error()})
		return
	}
	want = entryAttrs(want)
	have, err := rb.live.Listxattr(p)
	if err != nil {
		rb.problems = append(rb.problems, Problem{p, "extended attributes not restored: " + err.Error()})
		return
	}
	var failed []string
	did := false
	keep := map[string]bool{}
	for _, a := range want {
		keep[a.Name] = true
		if v, err := rb.live.XattrValue(p, a.Name); err == nil && v != nil && string(v) == a.Value {
			continue
		}
		if privilegeAttr(a.Name) {
			// Set by name, on an entry the sandbox (running on) may have swapped for
			// one of its own since syncOne wrote it: root's cordon would give the
			// sandbox's file a capability (red team rt3). Never set; removed above.
			failed = append(failed, fmt.Sprintf("extended attribute %s not restored: cordon sets no security.* or trusted.* attribute on the sandbox's files", a.Name))
			continue
		}
		if err := rb.live.Setxattr(p, a.Name, a.Value); err != nil {
			failed = append(failed, fmt.Sprintf("extended attribute %s not restored: %v", a.Name, attrErr(err)))
			continue
		}
		did = true
	}
	for _, n := range have {
		if keep[n] || overlayAttr(n) || privilegeAttr(n) {
			continue // a privilege attribute the sandbox cannot add: left as it is
		}
		if err := rb.live.Removexattr(p, n); err != nil {
			failed = append(failed, fmt.Sprintf("extended attribute %s not removed: %v", n, attrErr(err)))
			continue
		}
		did = true
	}
	for i, f := range failed {
		if i == maxAttrProblems {
			rb.problems = append(rb.problems, Problem{p, fmt.Sprintf("%d more extended attributes not restored", len(failed)-i)})
			break
		}
		rb.problems = append(rb.problems, Problem{p, f})
	}
	if did && (len(rb.changed) == before || rb.changed[before] != p) {
		rb.changed = append(rb.changed, p)
	}
}

// privilegeAttr reports whether the extended attribute name may grant a privilege
// (security.capability, an LSM's label) or is root's alone (trusted.*): a rollback
// neither sets nor removes one (the sandbox cannot add one), and a checkpoint keeps
// none.
func privilegeAttr(name string) bool {
	return strings.HasPrefix(name, "security.") || strings.HasPrefix(name, "trusted.")
}

// attrErr is err without the path an attribute's setting or removal names in it
// (the problem names it).
func attrErr(err error) error {
	if pe := (*os.PathError)(nil); errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// syncDir makes live's p a directory of want's mode and reconciles its entries that
// no upper directory names (they come from the workspace on one side only).
func (rb *rollback) syncDir(p string, wMode, lMode uint32) error {
	switch lType := lMode & syscall.S_IFMT; {
	case lType != syscall.S_IFDIR:
		if lType != 0 {
			if err := removeAll(rb.live, p, rb.max); err != nil {
				return err
			}
		}
		if err := rb.did(p, rb.live.Mkdir(p, wMode&0o777, rb.uid, rb.gid)); err != nil {
			return err
		}
	case lMode&0o777 != wMode&0o777:
		if err := rb.did(p, rb.live.Chmod(p, wMode&0o777)); err != nil {
			return err
		}
	}
	wn, err := boundedNames(rb.want, p, rb.max)
	if err != nil {
		return err
	}
	ln, err := boundedNames(rb.live, p, rb.max)
	if err != nil {
		return err
	}
	in := map[string]int{}
	for _, n := range wn {
		in[n] |= 1
	}
	for _, n := range ln {
		in[n] |= 2
	}
	names := make([]string, 0, len(in))
	for n, sides := range in {
		if sides != 3 {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		if c := path.Join(p, n); !rb.named[c] {
			if err := rb.sync(c); err != nil {
				return err
			}
		}
	}
	return nil
}

// boundedNames lists the directory rel of t, of at most max entries: past that,
// [ErrTooMany].
func boundedNames(t *linux.Tree, rel string, max int) ([]string, error) {
	if max <= 0 {
		return t.ReadNames(rel, 0)
	}
	names, err := t.ReadNames(rel, max+1)
	if err == nil && len(names) > max {
		err = tooMany(max)
	}
	return names, err
}

func (rb *rollback) did(p string, err error) error {
	if err == nil {
		rb.changed = append(rb.changed, p)
	}
	return err
}

// writeNamed replaces live's p with want's file of mode mode: a new name of the live
// file written already for another of its names, when it has many, else a copy.
func (rb *rollback) writeNamed(p string, mode uint32, lType uint32) error {
	w, err := rb.want.Lstat(p)
	if err != nil || w.Nlink < 2 {
		return rb.writeFile(p, mode, lType)
	}
	id := [2]uint64{uint64(w.Dev), w.Ino}
	if first, ok := rb.written[id]; ok {
		if lType == syscall.S_IFDIR {
			if err := removeAll(rb.live, p, rb.max); err != nil {
				return err
			}
		}
		if err := rb.live.Link(first, p); err == nil {
			return nil
		}
		// The first name is gone, or at its most names: p is written instead.
	}
	if err := rb.writeFile(p, mode, lType); err != nil {
		return err
	}
	rb.written[id] = p
	return nil
}

// writeFile replaces live's p with want's file of mode mode and modification time.
func (rb *rollback) writeFile(p string, mode uint32, lType uint32) error {
	if lType == syscall.S_IFDIR {
		if err := removeAll(rb.live, p, rb.max); err != nil {
			return err
		}
	}
	f, err := rb.want.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return &os.PathError{Op: "rollback", Path: p, Err: errors.New("the checkpoint's entry is not a regular file")}
	}
	// Its modification time too: a file restored from the workspace is then an exact
	// copy of it, which the upper directory's readers take as no change (copyOf).
	return rb.live.WriteFileFunc(p, mode&0o777, rb.uid, rb.gid, func(dst *os.File) error {
		if err := linux.CopySparse(dst, f); err != nil {
			return err
		}
		return linux.SetMtime(dst, fi.ModTime())
	})
}

// sameMax is the largest file sameContent compares: a larger one is taken to differ
// and written again (with its holes kept: linux.Tree.WriteFile copies extents), so
// that a rollback never reads more than this per file. The sandbox can make a file of
// terabytes of holes, which read as zeros, in a moment.
const sameMax = 64 << 20

// sameContent reports whether live's and want's regular files p hold the same bytes;
// files of more than sameMax bytes are taken to differ.
func (rb *rollback) sameContent(p string) bool {
	a, err := rb.live.Open(p)
	if err != nil {
		return false
	}
	defer a.Close()
	b, err := rb.want.Open(p)
	if err != nil {
		return false
	}
	defer b.Close()
	return sameBytes(a, b)
}

// sameBytes reports whether a and b are regular files of the same bytes; files of
// more than sameMax bytes are taken to differ.
func sameBytes(a, b *os.File) bool {
	fa, err1 := a.Stat()
	fb, err2 := b.Stat()
	if err1 != nil || err2 != nil || !fa.Mode().IsRegular() || !fb.Mode().IsRegular() || fa.Size() != fb.Size() || fa.Size() > sameMax {
		return false
	}
	// Both are read to sameMax at most, whatever they grow to meanwhile.
	lr, wr := io.LimitReader(a, sameMax+1), io.LimitReader(b, sameMax+1)
	// Buffers of the files' size (and one byte more, to meet the end), 64 KiB at most:
	// telling a restored directory a copy compares many small files.
	n := min(fa.Size()+1, 64<<10)
	ba, bb := make([]byte, n), make([]byte, n)
	for {
		na, ea := io.ReadFull(lr, ba)
		nb, eb := io.ReadFull(wr, bb)
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			return false
		}
		if ea != nil || eb != nil {
			return (ea == io.EOF || ea == io.ErrUnexpectedEOF) && (eb == io.EOF || eb == io.ErrUnexpectedEOF)
		}
	}
}

// UpperPaths lists the paths of the upper directory upper, parents first, following
// no link (the sandbox writes it meanwhile); entries that vanish while it reads are
// skipped, and so are those below an opaque directory that is an exact copy of the
// workspace's (copyOf; workspace "": none is taken as one). It lists at most max (limits.diff.entries): past that, [ErrTooMany]; and
// paths of at most maxPathLen bytes, pathBytesPerEntry per entry of max in all: past
// that, [ErrTooLong]. A directory's names are read a batch at a time.
func UpperPaths(upper, workspace string, max int) ([]string, error) {
	t, err := linux.OpenTree(upper)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	lower := openLower(workspace, t, max)
	defer lower.Close()
	root, err := t.OpenDir(".")
	if err != nil {
		return nil, err
	}
	defer root.Close()
	var out []string
	held := 0 // bytes of the paths in out
	var walk func(d *linux.Dir, rel string) error
	walk = func(d *linux.Dir, rel string) error {
		return d.EachNames(namesBatch, func(names []string) error {
			if len(out)+len(names) > max {
				return tooMany(max)
			}
			for _, n := range names {
				p := path.Join(rel, n)
				if held += len(p); len(p) > maxPathLen || held > max*pathBytesPerEntry {
					return tooLong(p)
				}
				out = append(out, p)
				st, err := d.Lstat(n)
				if err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFDIR || isCopy(d, n, p, lower) {
					continue // gone, not a directory, or the workspace's as it is
				}
				sub, err := d.Sub(n)
				if err != nil {
					continue // gone, or no longer a directory
				}
				err = walk(sub, p)
				sub.Close()
				if err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := walk(root, "."); err != nil {
		return nil, err
	}
	return out, nil
}
