package contract

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// exposure orders what the sandbox gets at a path, from nothing to the host's own files
// writable.
type exposure int

const (
	unseen   exposure = iota // not mounted, or masked
	private                  // a private tmpfs: writable, but nothing of the host's
	readOnly                 // the host's files, read-only
	writable                 // the host's files, read-write
)

// rank orders exposures for comparison: a private tmpfs shows the sandbox nothing of
// the host's, as a mask does.
func (e exposure) rank() exposure { return max(e, private) }

func (e exposure) String() string {
	return [...]string{"hidden", "a private tmpfs", "read-only", "writable"}[e]
}

// mountView answers what a compiled mount table shows at any path.
type mountView map[string]*Mount

func viewOf(p *Plan) mountView {
	v := mountView{}
	for i := range p.Mounts {
		v[p.Mounts[i].Path] = &p.Mounts[i]
	}
	return v
}

// enclosing returns the deepest mount at or above p, or nil.
func (v mountView) enclosing(p string) *Mount {
	for q := p; ; q = filepath.Dir(q) {
		if m, ok := v[q]; ok {
			return m
		}
		if q == "/" || q == "." {
			return nil
		}
	}
}

func exposureOf(m *Mount) exposure {
	switch {
	case m == nil || m.Type == Mask:
		return unseen
	case m.Type == Tmpfs:
		return private
	case m.Access == ReadWrite:
		return writable
	case m.Access == ReadOnly:
		return readOnly
	}
	return unseen
}

// most returns the highest exposure at p or anywhere below it.
func (v mountView) most(p string) exposure {
	e := exposureOf(v.enclosing(p))
	for q, m := range v {
		if within(q, p) {
			e = max(e, exposureOf(m))
		}
	}
	return e
}

// mountPos locates the contract rule behind mount m: the filesystem entry whose
// position its Why names (FILE:LINE:COL), else the file alone (a default or a
// mandatory rule), or "" when nothing is mounted.
func (s Compiled) mountPos(m *Mount) string {
	if m == nil {
		return ""
	}
	if s.Contract != nil {
		fs := s.Contract.Filesystem
		var ps []Pos
		for _, l := range [][]Str{fs.Readable, fs.Writable, fs.DenyWrite, fs.DenyRead} {
			for _, e := range l {
				ps = append(ps, e.Pos)
			}
		}
		for _, w := range fs.Widen {
			ps = append(ps, w.Pos)
		}
		for _, p := range ps {
			if where := s.at(p); where != "" && mentions(m.Why, where) {
				return where
			}
		}
	}
	return s.present(Pos{})
}

// mentions reports whether why names the location where, not merely a longer one
// ("f:3:1" in "f:3:12").
func mentions(why, where string) bool {
	for i := 0; ; {
		j := strings.Index(why[i:], where)
		if j < 0 {
			return false
		}
		end := i + j + len(where)
		if end == len(why) || why[end] < '0' || why[end] > '9' {
			return true
		}
		i = end
	}
}

// compareMounts compares what the sandbox gets at every path either mount table names.
// Between those mount points access is constant in both tables, so comparing at each
// one covers every path: a new readable /srv is wider even when the old contract had
// /srv/a, and a new grant inside a granted directory at the same access is not. A
// change that follows from one already reported above it (the same mount in force) is
// not repeated; the contract files themselves, which each run protects, and paths a
// filesystem.widen entry shows (compareWidenings reports those) are left out.
func compareMounts(c *comparison) {
	ov, nv := viewOf(c.old.Plan), viewOf(c.new.Plan)
	skip := map[string]bool{}
	for _, f := range []string{c.old.Plan.ContractFile, c.new.Plan.ContractFile} {
		if r, err := resolveExisting(f); err == nil && f != "" {
			skip[r] = true
		}
	}
	var points []string
	for p := range ov {
		points = append(points, p)
	}
	for p := range nv {
		if _, ok := ov[p]; !ok {
			points = append(points, p)
		}
	}
	slices.Sort(points) // a directory sorts before everything inside it
	dotgit := filepath.Join(c.new.Plan.Workspace, ".git")
	gitMoved := gitMode(c.old) != gitMode(c.new)
	var reported []string // points reported, with the mount that decided
	decided := map[string]*Mount{}
	for _, p := range points {
		om, nm := ov.enclosing(p), nv.enclosing(p)
		oe, ne := exposureOf(om), exposureOf(nm)
		if oe.rank() == ne.rank() || skip[p] || (gitMoved && within(p, dotgit)) {
			continue
		}
		wider := ne.rank() > oe.rank()
		cause := nm
		if !wider {
			cause = om
		}
		if wider && isWidening(c.new.Plan, nm) || !wider && isWidening(c.old.Plan, om) {
			continue
		}
		if slices.ContainsFunc(reported, func(q string) bool { return within(p, q) && decided[q] == cause }) {
			continue
		}
		reported = append(reported, p)
		decided[p] = cause
		kind := KindFilesystem
		if within(p, dotgit) {
			kind = KindGit
		}
		c.add(kind, wider, c.old.mountPos(om), c.new.mountPos(nm), "%s is %s (was %s)", p, ne, oe)
	}
}

// isWidening reports whether mount m is a filesystem.widen entry of p.
func isWidening(p *Plan, m *Mount) bool {
	return m != nil && slices.ContainsFunc(p.Widenings, func(w WideningPlan) bool { return w.Path == m.Path && w.Access == m.Access })
}

// compareWidenings compares the filesystem.widen entries: a new path, or one whose
// access went up, is wider.
func compareWidenings(c *comparison) {
	diffWidenings(c, c.old.Plan.Widenings, c.new.Plan.Widenings, true)
	diffWidenings(c, c.new.Plan.Widenings, c.old.Plan.Widenings, false)
}

// diffWidenings reports the entries of b that a lacks or has at lower access; wider
// says which way that goes (a is the old contract's when wider).
func diffWidenings(c *comparison, a, b []WideningPlan, wider bool) {
	for _, w := range b {
		i := slices.IndexFunc(a, func(x WideningPlan) bool { return x.Path == w.Path })
		oldAt, newAt := "", w.Where
		if i >= 0 {
			oldAt = a[i].Where
		}
		if !wider {
			oldAt, newAt = newAt, oldAt
		}
		switch {
		case i < 0 && wider:
			c.add(KindWiden, true, oldAt, newAt, "filesystem.widen exposes protected %s %s (%s)", w.Path, accessWord(w.Access), w.Why)
		case i < 0:
			c.add(KindWiden, false, oldAt, newAt, "filesystem.widen no longer exposes protected %s", w.Path)
		case w.Access > a[i].Access:
			now, was := w.Access, a[i].Access
			if !wider {
				now, was = was, now
			}
			c.add(KindWiden, wider, oldAt, newAt, "filesystem.widen: protected %s is %s (was %s)", w.Path, accessWord(now), accessWord(was))
		}
	}
}

func accessWord(a Access) string {
	if a == ReadWrite {
		return "writable"
	}
	return "read-only"
}

// gitMode is a side's filesystem.git, its default filled in.
func gitMode(s Compiled) string {
	if s.Contract == nil || s.Contract.Filesystem.Git.Value == "" {
		return GitReadOnly
	}
	return s.Contract.Filesystem.Git.Value
}

// compareFilesystemRules compares the filesystem rules whose effect the mount tables do
// not fully show: filesystem.git, and the deny lists, whose globs match only what
// exists when the contract is compiled (a removed **/*.pem exposes the keys created
// later too).
func compareFilesystemRules(c *comparison) {
	if o, n := gitMode(c.old), gitMode(c.new); o != n {
		what := "the sandbox may write the workspace's .git objects, refs and index"
		if n != GitCommit {
			what = "the workspace's .git is read-only"
		}
		c.add(KindGit, n == GitCommit, c.old.at(c.old.Contract.Filesystem.Git.Pos), c.new.at(c.new.Contract.Filesystem.Git.Pos),
			"filesystem.git: %s (was %s): %s", n, o, what)
	}
	ofs, nfs := c.old.Contract.Filesystem, c.new.Contract.Filesystem
	diffDenials(c, c.old, c.new, "deny_read", ofs.DenyRead, nfs.DenyRead, nil, unseen, true)
	diffDenials(c, c.old, c.new, "deny_write", ofs.DenyWrite, nfs.DenyWrite, nfs.DenyRead, readOnly, true)
	diffDenials(c, c.new, c.old, "deny_read", nfs.DenyRead, ofs.DenyRead, nil, unseen, false)
	diffDenials(c, c.new, c.old, "deny_write", nfs.DenyWrite, ofs.DenyWrite, ofs.DenyRead, readOnly, false)
}

// diffDenials reports the entries of from's list that to's lacks (or, for deny_write,
// also lacks in stronger, its deny_read), unless they make no difference in to: what
// the entry names (for a glob, the directory it searches) shows at most safe there
// anyway. wider says whether from is the old contract.
func diffDenials(c *comparison, from, to Compiled, name string, gone, kept, stronger []Str, safe exposure, wider bool) {
	v := viewOf(to.Plan)
	for _, e := range gone {
		key := denyKey(e.Value, from.Plan)
		has := func(x Str) bool { return denyKey(x.Value, to.Plan) == key }
		if slices.ContainsFunc(kept, has) || slices.ContainsFunc(stronger, has) {
			continue
		}
		base, _ := doublestar.SplitPattern(key)
		if !strings.ContainsAny(key, "*?[") {
			base = key
		}
		if v.most(filepath.FromSlash(base)).rank() <= safe.rank() {
			continue
		}
		if wider {
			c.add(KindDeny, true, from.at(e.Pos), "", "filesystem.%s %q is gone: what it named is no longer denied", name, e.Value)
		} else {
			c.add(KindDeny, false, "", from.at(e.Pos), "filesystem.%s %q is new", name, e.Value)
		}
	}
}

// denyKey makes a deny entry comparable across contracts: absolute, "~" expanded, the
// "/**" suffix (which means the path itself) dropped, cleaned. Symbolic links are not
// resolved: the mount tables are compared separately.
func denyKey(v string, p *Plan) string {
	v = expandHome(strings.TrimSuffix(v, "/**"), p.Home)
	if !filepath.IsAbs(v) {
		v = filepath.Join(p.Workspace, v)
	}
	return filepath.Clean(v)
}
