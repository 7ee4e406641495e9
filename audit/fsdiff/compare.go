package fsdiff

import (
	"cmp"
	"encoding/hex"
	"iter"
	"maps"
	"slices"
)

// pending is a change whose patch is not yet written.
type pending struct {
	Change
	old, new *entry // nil on the missing side
	// rewritten marks a file whose stat changed and whose new content is what the
	// git index claimed for it at the baseline, which was not read: the claim is
	// unverified, so the write is reported rather than taken for "unchanged".
	rewritten bool
}

// compare lists what changed from snapshot a to snapshot b (of the workspace dir) and
// renders the patch.
func compare(dir string, a, b *snapshot, opts Options) *Result {
	return compareAt(dir, a, b, opts, maps.Keys(b.entries), maps.Keys(a.entries))
}

// compareAt is compare looking only at the paths of b and of a that inB and inA yield:
// every path whose entry differs between a and b (a diff from a watch's report knows
// them; the entries of the others are the same ones).
func compareAt(dir string, a, b *snapshot, opts Options, inB, inA iter.Seq[string]) *Result {
	r := &resolver{dir: dir, maxText: opts.MaxTextSize, maxRetained: opts.MaxRetained, opts: opts, hashLeft: opts.MaxHashBytes - b.hashed}
	defer r.close()
	var added, deleted []string
	var out []pending
	notCompared := 0
	for p := range inB {
		nb, ok := b.entries[p]
		if !ok {
			continue
		}
		oa, ok := a.entries[p]
		if !ok {
			if a.bounds.under(p) {
				notCompared++ // the baseline did not record what was there
				continue
			}
			added = append(added, p)
			continue
		}
		if oa == nb {
			continue
		}
		unverified := oa.blob != nil
		switch oa = r.full(p, oa); {
		case fileType(oa.mode) != fileType(nb.mode):
			// A type change (file to link, …) reads best as a deletion and an addition.
			added, deleted = append(added, p), append(deleted, p)
		case same(oa, nb) && unverified && oa.hasSum:
			pd := newPending(Modified, p, p, oa, nb)
			pd.rewritten, pd.OldSHA256 = true, ""
			out = append(out, pd)
		case !same(oa, nb) || !oa.xattrs.equal(nb.xattrs):
			out = append(out, newPending(Modified, p, p, oa, nb))
		case oa.kind != Dir && oa.key.mtime != nb.key.mtime:
			out = append(out, newPending(Touched, p, p, oa, nb))
		}
	}
	for p := range inA {
		if _, ok := a.entries[p]; !ok {
			continue
		}
		if _, ok := b.entries[p]; !ok {
			if b.bounds.under(p) {
				notCompared++ // not seen, which is not gone
				continue
			}
			deleted = append(deleted, p)
		}
	}
	slices.Sort(added)
	slices.Sort(deleted)
	old := func(p string) *entry { return r.full(p, a.entries[p]) }
	out = append(out, pairRenames(old, b, &added, &deleted)...)
	for _, p := range added {
		if e := b.entries[p]; e.kind != Dir || e.empty {
			out = append(out, newPending(Added, p, "", nil, e))
		}
	}
	for _, p := range deleted {
		if e := old(p); e.kind != Dir || e.empty {
			out = append(out, newPending(Deleted, p, "", e, nil))
		}
	}
	slices.SortFunc(out, func(x, y pending) int {
		return cmp.Or(cmp.Compare(x.Path, y.Path), cmp.Compare(opOrder(x.Op), opOrder(y.Op)))
	})
	res := &Result{Scan: b.stats, Problems: b.problems, Gap: gapOf(a, b, out, notCompared)}
	var p patcher
	for i := range out {
		if p.buf.Len() < opts.MaxPatch && !opts.late() {
			p.write(&out[i], opts)
		} else {
			res.Gap.PatchOmitted++
		}
		res.Changes = append(res.Changes, out[i].Change)
		res.Insertions += out[i].Added
		res.Deletions += out[i].Deleted
	}
	res.Patch = p.cut(opts.MaxPatch, &res.Gap)
	res.Gap.TimedOut = res.Gap.TimedOut || opts.late()
	res.Problems = append(res.Problems, r.problems...)
	return res
}

// opOrder puts the deletion of a path before an addition at the same path.
func opOrder(o Op) int {
	if o == Deleted {
		return 0
	}
	return 1
}

// same reports whether two entries for one path have the same mode and content. Without
// a digest on both sides (special or unreadable files) size and mtime stand in for it;
// a directory has no content of its own.
func same(a, b *entry) bool {
	if a.mode != b.mode {
		return false
	}
	if a.kind == Dir || b.kind == Dir {
		return a.kind == b.kind
	}
	if unhashed(a) || unhashed(b) {
		return a.key == b.key // not read: any change of the stat data is a change
	}
	if a.hasSum && b.hasSum {
		return a.sum == b.sum // whatever the kinds: a file may fall out of the memory budget
	}
	return !a.hasSum && !b.hasSum && a.kind == b.kind && a.key.size == b.key.size && a.key.mtime == b.key.mtime
}

func fileType(mode uint32) uint32 { return mode & 0o170000 }

// pairRenames matches deleted and added paths with identical, non-empty content and the
// same file type, in path order, and removes them from added and deleted.
func pairRenames(old func(string) *entry, b *snapshot, added, deleted *[]string) []pending {
	type content struct {
		sum [32]byte
		typ uint32
	}
	gone := make(map[content][]string)
	for _, p := range *deleted {
		if e := old(p); e.hasSum && e.size > 0 {
			k := content{e.sum, fileType(e.mode)}
			gone[k] = append(gone[k], p)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	var out []pending
	used := make(map[string]bool)
	keep := (*added)[:0]
	for _, p := range *added {
		e := b.entries[p]
		k := content{e.sum, fileType(e.mode)}
		if olds := gone[k]; e.hasSum && e.size > 0 && len(olds) > 0 && olds[0] != p {
			gone[k] = olds[1:]
			used[olds[0]] = true
			out = append(out, newPending(Renamed, p, olds[0], old(olds[0]), e))
			continue
		}
		keep = append(keep, p)
	}
	*added = keep
	*deleted = slices.DeleteFunc(*deleted, func(p string) bool { return used[p] })
	return out
}

func newPending(op Op, p, oldPath string, oa, nb *entry) pending {
	c := Change{Op: op, Path: p, OldPath: oldPath}
	if oa != nil {
		c.Kind, c.OldMode, c.OldSize, c.OldSHA256 = oa.kind, oa.mode, oa.size, digest(oa)
	}
	if nb != nil {
		c.Kind, c.NewMode, c.NewSize, c.NewSHA256 = nb.kind, nb.mode, nb.size, digest(nb)
	}
	if oa != nil && nb != nil && oa.kind == Binary {
		c.Kind = Binary
	}
	if op == Modified || op == Touched {
		c.OldPath = ""
	}
	switch {
	case nb == nil:
	case oa == nil:
		c.Xattrs = xattrChanges(nil, nb.xattrs)
	default:
		c.Xattrs = xattrChanges(oa.xattrs, nb.xattrs)
		if oa.kind != Dir && oa.key.mtime != nb.key.mtime {
			c.OldMtime, c.NewMtime = mtimeOf(oa), mtimeOf(nb)
		}
	}
	return pending{Change: c, old: oa, new: nb}
}

func digest(e *entry) string {
	if !e.hasSum {
		return ""
	}
	return hex.EncodeToString(e.sum[:])
}
