package fsdiff

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
)

// Watched is what a watch of the workspace's file system reported changed in the
// workspace since before its baseline was taken (on Linux, a fanotify group marking
// the whole file system: internal/linux's WatchChanges).
type Watched struct {
	// Paths are the paths changed; Deep where a name was made, removed or moved,
	// so that anything below it may differ.
	Paths []ChangedPath
	// Objects are files changed with no directory reported (the link count of a
	// file changes with a hard link made elsewhere): device and inode.
	Objects [][2]uint64
}

// DiffWatched is [Tracker.Diff] with the walk replaced by the paths w names: the new
// snapshot is the baseline with those paths read again as a walk reads them (the
// same scanner, the same bounds), so the result is the one Diff would give, at the
// cost of what changed. Also read again, whatever w says: the files that had other
// hard links at the baseline (a write through a name outside the workspace is
// reported there), those w's objects name, and those whose stat data were racy.
//
// When w cannot stand for a walk of this workspace, why says so and nothing is done:
// the baseline stopped at a bound, the workspace spans more than one file system
// (a watch marks one), or its directory was replaced. The caller then calls Diff.
// w must come from a watch that was in place before [New] read anything and that
// lost nothing: that is the caller's to know.
func (t *Tracker) DiffWatched(ctx context.Context, w Watched) (res *Result, why string, err error) {
	opts := t.opts.started()
	base := t.base
	if why := t.unwatchable(); why != "" {
		return nil, why, nil
	}
	if rr := t.opts.reread; rr != nil {
		if rr.all {
			return nil, "every file is to be read again", nil
		}
		w.Paths = slices.Concat(w.Paths, rr.paths)
	}
	changed, why := t.changedPaths(w)
	if why != "" {
		return nil, why, nil
	}
	targets := changedTargets(changed, opts)
	gone := base.replaced(targets)
	entries := maps.Clone(base.entries)
	names := maps.Clone(base.names)
	files := base.stats.Files
	for p := range gone {
		if base.entries[p].kind != Dir {
			files--
		}
		delete(entries, p)
		delete(names, p)
	}
	part, err := partialScan(ctx, t.dir, opts, targets, base, len(entries))
	if err != nil {
		return nil, "", err
	}
	for p, e := range part.entries {
		if _, ok := entries[p]; !ok && e.kind != Dir {
			files++
		}
		entries[p] = e
	}
	for d, n := range part.names {
		names[d] = n
	}
	next := &snapshot{
		entries:  entries,
		problems: part.problems,
		bounds:   part.bounds,
		hashed:   part.hashed,
		listed:   part.listed,
		names:    names,
		stats:    part.stats,
		suspect:  slices.Concat(slices.DeleteFunc(slices.Clone(base.suspect), func(p string) bool { return gone[p] }), part.suspect),
		devices:  slices.Clone(base.devices),
	}
	for _, d := range part.devices {
		if !slices.Contains(next.devices, d) {
			next.devices = append(next.devices, d)
		}
	}
	next.stats.Files, next.stats.Watched = files, true
	// Only the paths gone from the baseline or scanned again can differ.
	differ := maps.Clone(gone)
	for p := range part.entries {
		differ[p] = true
	}
	res = compareAt(t.dir, base, next, opts, maps.Keys(differ), maps.Keys(differ))
	t.base = next
	return res, "", nil
}

// replaced is the set of s's entries that targets read again: each one a target
// names, and what lies below a deep one. Below a directory s lists whole, what lies
// below is found from its listings; below one it does not (bounded), every entry is
// looked at.
func (s *snapshot) replaced(targets []target) map[string]bool {
	gone := make(map[string]bool, len(targets))
	var deep []string
	for _, tg := range targets {
		e, ok := s.entries[tg.rel]
		if !ok {
			continue
		}
		gone[tg.rel] = true
		if tg.deep && e.kind == Dir {
			deep = append(deep, tg.rel)
		}
	}
	for len(deep) > 0 {
		d := deep[len(deep)-1]
		deep = deep[:len(deep)-1]
		listing, ok := s.names[d]
		if !ok && s.entries[d].empty {
			continue
		}
		if !ok {
			return s.below(gone, targets)
		}
		for _, n := range listing {
			p := path.Join(d, n)
			e, ok := s.entries[p]
			if !ok {
				continue
			}
			gone[p] = true
			if e.kind == Dir {
				deep = append(deep, p)
			}
		}
	}
	return gone
}

// below is replaced by a pass over every entry of s.
func (s *snapshot) below(gone map[string]bool, targets []target) map[string]bool {
	deep := make(map[string]bool)
	for _, tg := range targets {
		if tg.deep {
			deep[tg.rel] = true
		}
	}
	for p := range s.entries {
		if below(p, deep) {
			gone[p] = true
		}
	}
	return gone
}

// changedPaths is what the diff from the baseline must look at again: the paths w
// names, and the baseline's entries it cannot vouch for (racy, of many names, or a
// file w reports changed by its identity alone), sorted: ancestors before what lies
// below them, and a deep path before the same path not deep (changedTargets keeps the
// first of a path), so that changedTargets drops what a deep target's walk covers.
// why says the baseline spans more than one file system: the watch cannot stand for
// a walk.
func (t *Tracker) changedPaths(w Watched) (changed []ChangedPath, why string) {
	for _, d := range t.base.devices {
		if d != t.root[0] {
			return nil, "the workspace spans more than one file system"
		}
	}
	changed = slices.Clone(w.Paths)
	for _, p := range t.base.suspect {
		changed = append(changed, ChangedPath{Path: p})
	}
	if len(w.Objects) > 0 {
		objects := make(map[[2]uint64]bool, len(w.Objects))
		for _, o := range w.Objects {
			objects[o] = true
		}
		for p, e := range t.base.entries {
			if objects[e.key.fileID()] {
				changed = append(changed, ChangedPath{Path: p})
			}
		}
	}
	slices.SortFunc(changed, func(a, b ChangedPath) int {
		if c := strings.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		switch {
		case a.Deep == b.Deep:
			return 0
		case a.Deep:
			return -1
		}
		return 1
	})
	return changed, ""
}

// unwatchable says why a watch's report cannot stand for a walk from t's baseline, or
// "".
func (t *Tracker) unwatchable() string {
	b := t.base.bounds
	switch {
	case t.root == [2]uint64{}:
		return "no baseline of this workspace's directory to compare with"
	case b.unlisted > 0 || b.timedOut || len(b.incomplete) > 0:
		return "the baseline stopped at a bound"
	}
	now, err := rootID(t.dir)
	if err != nil {
		return err.Error()
	}
	if now != t.root {
		return "the workspace's directory was replaced"
	}
	return ""
}

// rootID is the device and inode of the directory dir.
func rootID(dir string) ([2]uint64, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return [2]uint64{}, fmt.Errorf("workspace: %w", err)
	}
	return keyOf(fi).fileID(), nil
}

// WatchedFrom is the Watched of a watch's report: paths, each with whether a name
// was made, removed or moved there (deep), and objects.
func WatchedFrom(paths map[string]bool, objects [][2]uint64) Watched {
	w := Watched{Paths: make([]ChangedPath, 0, len(paths)), Objects: objects}
	for p, deep := range paths {
		w.Paths = append(w.Paths, ChangedPath{Path: p, Deep: deep})
	}
	return w
}
