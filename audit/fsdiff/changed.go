package fsdiff

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
)

// ChangedPath is one path that may differ between two trees, for [DiffChanged]: a
// staged run's change set (its overlay's upper directory) names every such path.
type ChangedPath struct {
	Path string // slash-separated, relative to the trees' roots
	// Deep says that every entry below Path, on either side, may differ: a deletion
	// (a whiteout), a directory that replaced what was there (an opaque directory) or
	// a file or link written over a directory. Without it a directory at Path is only
	// an ancestor of other changed paths: its own entries are compared only as they
	// are listed themselves.
	Deep bool
}

// DiffChanged compares the tree before with the tree after at the paths changed only,
// with no walk of either tree: it is [Tracker.Diff] of after against a baseline of
// before, for two trees known to differ at those paths at most (after is an overlay of
// a change set on before). Both sides are read as a snapshot reads them (the same
// rules for ".git", [Options.Exclude] and [Options.GitDir], the same limits), so the
// result is the one a walk of both trees would give. Result.Scan describes what was
// read of after; Problems holds both sides'.
func DiffChanged(ctx context.Context, before, after string, changed []ChangedPath, opts Options) (*Result, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("fsdiff options: %w", err)
	}
	opts = opts.withDefaults().started()
	real, err1 := os.Stat(before)
	view, err2 := os.Stat(after)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	targets := changedTargets(changed, opts)
	a, err := partialScan(ctx, before, opts, targets, nil, 0)
	if err != nil {
		return nil, err
	}
	aopts := opts
	aopts.devAlias = [2]uint64{devOf(view), devOf(real)}
	b, err := partialScan(ctx, after, aopts, targets, nil, 0)
	if err != nil {
		return nil, err
	}
	b.problems = append(a.problems, b.problems...)
	return compare(before, a, b, opts), nil
}

// target is a path a partial snapshot reads: a file (or, deep, the whole tree below a
// directory), or a nested repository's .git.
type target struct {
	rel          string
	deep, nested bool
}

// changedTargets maps changed paths to what a walk would have recorded for them, in
// path order, without paths below a deep one (its walk covers them): a path inside a
// nested repository is that repository's .git entry, a path a walk skips is dropped.
func changedTargets(changed []ChangedPath, opts Options) []target {
	seen := make(map[string]bool)
	var out []target
	deepAt := make(map[string]bool)
	for _, c := range changed {
		t, ok := targetOf(c, opts)
		if !ok || seen[t.rel] || below(t.rel, deepAt) {
			continue
		}
		seen[t.rel] = true
		if t.deep {
			deepAt[t.rel] = true
		}
		out = append(out, t)
	}
	return out
}

// targetOf is what a walk records for the changed path c, as scanDir decides it
// component by component; ok is false for a path it never reaches.
func targetOf(c ChangedPath, opts Options) (t target, ok bool) {
	p := path.Clean(c.Path)
	if p == "." || !validRel(p) {
		return target{}, false
	}
	parts := strings.Split(p, "/")
	for i := range parts {
		crel := strings.Join(parts[:i+1], "/")
		if parts[i] == ".git" && i > 0 && !strings.HasPrefix(crel, ".git/") {
			return target{rel: crel, nested: true}, true
		}
		if excluded(crel, opts.Exclude, opts.GitDir) {
			return target{}, false
		}
	}
	return target{rel: p, deep: c.Deep}, true
}

// validRel reports whether the clean path p names an entry below the trees' roots: not
// absolute, not above them. Unlike fs.ValidPath it takes names that are not UTF-8: on
// Linux a name is any bytes, and a walk records them (a change below such a name that a
// diff from a change set dropped would be in no diff).
func validRel(p string) bool {
	return p != ".." && !strings.HasPrefix(p, "/") && !strings.HasPrefix(p, "../")
}

// below reports whether p lies below one of dirs: it looks its ancestors up, so
// that the cost is the length of p, not the number of dirs (a staged run's change set
// may hold a deep entry per path: comparing each path with every one was quadratic).
func below(p string, dirs map[string]bool) bool {
	for i := len(p) - 1; i > 0; i-- {
		if p[i] == '/' && dirs[p[:i]] {
			return true
		}
	}
	return false
}

// partialScan is a snapshot of dir holding only what a walk records at targets. prev,
// when not nil, is an earlier snapshot whose unchanged entries are taken as they are
// (as a walk takes them), and kept the entries of it that the caller keeps beside
// the targets: they count against the entries bound.
func partialScan(ctx context.Context, dir string, opts Options, targets []target, prev *snapshot, kept int) (*snapshot, error) {
	s, done, err := openScanner(dir, opts)
	if err != nil {
		return nil, err
	}
	defer done()
	if prev != nil {
		s.prev, s.prevNames = prev.entries, prev.names
	}
	s.entries.Store(int64(kept))
	var parents parentCache
	defer parents.close()
	for _, t := range targets {
		if err := ctx.Err(); err != nil {
			break
		}
		if !s.admit(path.Dir(t.rel), 1, len(t.rel)) {
			continue
		}
		s.scanTarget(ctx, t, &parents)
	}
	s.wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("scanning workspace: %w", err)
	}
	return s.snapshot(), nil
}

// scanTarget records what a walk would record at t: nothing when its parent is not a
// directory reached without following a link (the walk would not reach it either).
func (s *scanner) scanTarget(ctx context.Context, t target, parents *parentCache) {
	dir, name := path.Split(t.rel)
	r, err := parents.open(s, strings.TrimSuffix(dir, "/"))
	if err != nil {
		if !missing(err) {
			s.problem(t.rel, err)
		}
		return
	}
	if t.nested {
		if e := nestedRepo(s.root, t.rel, s.opts); e != nil {
			s.put(t.rel, e)
		}
		return
	}
	fi, err := r.lstat(name)
	switch {
	case missing(err):
	case err != nil:
		s.problem(t.rel, err)
	case fi.IsDir():
		if t.deep {
			s.wg.Add(1)
			go s.scanDir(ctx, t.rel, fi, nil)
			break
		}
		// An ancestor of other changes, or a directory changed itself (its mode,
		// its attributes; a new one): recorded as a walk records it.
		s.scanDirOnly(r, name, t.rel, fi)
	default:
		s.put(t.rel, s.fileEntry(r, name, t.rel, fi))
	}
}

// scanDirOnly records the directory entry name of r (at rel, with lstat fi) without
// scanning what it holds.
func (s *scanner) scanDirOnly(r dirHandle, name, rel string, fi fs.FileInfo) {
	d, err := r.sub(name)
	if err != nil {
		if !missing(err) {
			s.problem(rel, err)
		}
		return
	}
	defer d.close()
	got, err := d.stat()
	if err == nil && !sameFile(got, fi) {
		err = errors.New("directory replaced during scan")
	}
	total := 0
	if err == nil {
		_, total, err = d.names(0)
	}
	if err != nil {
		s.problem(rel, err)
		return
	}
	s.put(rel, s.dirEntry(d, rel, fi, total == 0))
}

func (s *scanner) put(rel string, e *entry) {
	s.mu.Lock()
	s.out[rel] = e
	s.mu.Unlock()
}

// missing reports whether err means that a path is not there: absent, or below
// something that is not a directory or is a symbolic link, where a walk does not go.
func missing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ELOOP)
}

// parentCache keeps the directory last opened for scanTarget: targets come in path
// order, so siblings share one open of their parent.
type parentCache struct {
	rel string
	d   dirHandle
}

// open returns the directory rel ("" for the top), opened one component at a time
// from the top, following no link.
func (c *parentCache) open(s *scanner, rel string) (dirHandle, error) {
	if rel == "" || rel == "." {
		return s.top, nil
	}
	if c.d != nil && c.rel == rel {
		return c.d, nil
	}
	c.close()
	d, err := s.openPath(rel)
	if err != nil {
		return nil, err
	}
	c.rel, c.d = rel, d
	return d, nil
}

func (c *parentCache) close() {
	if c.d != nil {
		c.d.close()
		c.d = nil
	}
}
