package contract

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// grantRecord remembers where a readable/writable grant came from, for errors.
type grantRecord struct {
	path  string
	pos   Pos
	field string
}

// workspace resolves the workspace directory. It reports whether that worked, since
// nothing else about the file system can be checked without it.
func (k *compiler) workspace() bool {
	c := k.c
	base := k.h.Cwd
	if c.File != "" {
		if abs, err := filepath.Abs(c.File); err == nil {
			base = filepath.Dir(abs)
		}
	}
	raw := c.Workspace.Value
	if raw == "" {
		raw = "."
	}
	ws, err := k.resolve(raw, base)
	if err != nil {
		k.errorf(c.Workspace.Pos, "workspace: %v", err)
		return false
	}
	st, err := os.Stat(ws)
	if err != nil || !st.IsDir() {
		k.errorf(c.Workspace.Pos, "workspace: %s is not an existing directory", ws)
		return false
	}
	if why := tooBroad(ws, k.h.Home); why != "" {
		k.errorf(c.Workspace.Pos, "workspace: %s %s", ws, why)
		return false
	}
	k.ws = ws
	k.plan.Workspace = ws
	k.plan.Workdir = ws
	if cwd, err := filepath.EvalSymlinks(k.h.Cwd); err == nil && within(cwd, ws) {
		k.plan.Workdir = cwd
	}
	return true
}

// tooBroad says why a directory cannot be the workspace or a writable path, or "".
func tooBroad(p, home string) string {
	if p == "/" {
		return "is the root directory; the workspace must be a project directory"
	}
	for _, s := range SystemPreset {
		if within(p, s) {
			return "is a system path; system paths are at most read-only"
		}
	}
	return ""
}

// filesystem builds the mount table: grants first (readable, then writable, which
// raises access), then denials (which lower it and win over anything deeper), then the
// mandatory denials, then the named widenings.
func (k *compiler) filesystem() {
	fsys := k.c.Filesystem
	k.plan.Home = k.h.Home
	if k.plan.Home == "" || k.plan.Home == "/" {
		k.plan.Home = "/home/cordon"
	}
	k.mounts["/tmp"] = &Mount{Path: "/tmp", Type: Tmpfs, Access: ReadWrite, Dir: true, Why: "private /tmp"}
	var grants []grantRecord

	readable := fsys.Readable
	if !fsys.set["readable"] {
		readable = []Str{{Value: "@system"}}
	}
	for _, r := range readable {
		if r.Value == "@system" {
			k.system()
			continue
		}
		if p, ok := k.grantPath(r, "readable", ReadOnly); ok {
			grants = append(grants, grantRecord{p, r.Pos, "readable"})
		}
	}
	k.grant(k.ws, ReadOnly, false, "workspace (always readable)")

	writable := fsys.Writable
	if !fsys.set["writable"] {
		writable = []Str{{Value: "."}}
	}
	for _, w := range writable {
		if p, ok := k.grantPath(w, "writable", ReadWrite); ok {
			grants = append(grants, grantRecord{p, w.Pos, "writable"})
		}
	}
	if !k.visibleUnder(k.plan.Home) {
		k.mounts[k.plan.Home] = &Mount{Path: k.plan.Home, Type: Tmpfs, Access: ReadWrite, Dir: true, Why: "empty private $HOME"}
	}

	for _, d := range fsys.DenyWrite {
		k.denyPath(d, "deny_write", ReadOnly)
	}
	for _, d := range fsys.DenyRead {
		k.denyPath(d, "deny_read", Hidden)
	}
	k.protectContracts()
	k.mandatory(grants)
	k.widen()
}

// ContractName is the file cordon reads as the contract when none is named.
const ContractName = "cordon.yaml"

// protectContracts makes every contract the next run could read from inside the
// workspace read-only, and keeps the missing ones from being created: the workspace's
// and the working directory's cordon.yaml, and the contract file in force when it
// lies in the workspace. Otherwise one command rewrites the boundary of every run
// after it.
func (k *compiler) protectContracts() {
	const why = "a contract: what the sandbox writes never widens a later run"
	paths := []string{filepath.Join(k.ws, ContractName)}
	if cwd, err := filepath.EvalSymlinks(k.h.Cwd); err == nil && within(cwd, k.ws) {
		paths = append(paths, filepath.Join(cwd, ContractName))
	}
	if f := k.plan.ContractFile; f != "" {
		if r, err := resolveExisting(f); err == nil && (r == k.ws || within(r, k.ws)) {
			paths = append(paths, r)
		}
	}
	for _, p := range paths {
		k.deny(p, ReadOnly, true, why) // a missing one: an empty directory, which git shows nowhere
	}
}

// grantPath resolves one readable/writable entry and grants it.
func (k *compiler) grantPath(s Str, field string, a Access) (string, bool) {
	if strings.ContainsAny(s.Value, "*?[") {
		k.errorf(s.Pos, "filesystem.%s: globs are only allowed in deny lists (%q)", field, s.Value)
		return "", false
	}
	p, err := k.resolve(strings.TrimSuffix(s.Value, "/**"), k.ws)
	if err != nil {
		k.errorf(s.Pos, "filesystem.%s: %v", field, err)
		return "", false
	}
	if lexical := filepath.Join(k.ws, s.Value); !filepath.IsAbs(s.Value) && !strings.HasPrefix(s.Value, "~") &&
		within(lexical, k.ws) && !within(p, k.ws) {
		k.errorf(s.Pos, "filesystem.%s: %q resolves to %s outside the workspace through a symbolic link; name the target explicitly if it is meant", field, s.Value, p)
		return "", false
	}
	st, err := os.Stat(p)
	if err != nil {
		k.errorf(s.Pos, "filesystem.%s: %s does not exist", field, p)
		return "", false
	}
	if p == "/" {
		k.errorf(s.Pos, "filesystem.%s: / is too broad; name the directories the run needs", field)
		return "", false
	}
	if a == ReadWrite {
		if why := tooBroad(p, k.h.Home); why != "" {
			k.errorf(s.Pos, "filesystem.writable: %s %s", p, why)
			return "", false
		}
	}
	k.grant(p, a, st.IsDir(), k.origin(field, s.Pos))
	return p, true
}

// grant makes p visible with at least access a.
func (k *compiler) grant(p string, a Access, dir bool, why string) {
	k.grantAt(p, p, a, dir, why)
}

// grantAt is grant for a path p that is read at the host path at.
func (k *compiler) grantAt(p, at string, a Access, dir bool, why string) {
	if m, ok := k.mounts[p]; ok {
		if m.Type == Bind && a > m.Access {
			m.Access, m.Why = a, why
		}
		return
	}
	if st, err := os.Stat(at); err == nil {
		dir = st.IsDir()
	}
	k.mounts[p] = &Mount{Path: p, Type: Bind, Access: a, Dir: dir, Why: why}
}

// enclosing returns the deepest mount at or above p, or nil when p is not visible.
func (k *compiler) enclosing(p string) *Mount {
	for q := p; ; q = filepath.Dir(q) {
		if m, ok := k.mounts[q]; ok {
			return m
		}
		if filepath.Dir(q) == q { // "/", or "." for a relative path, which no mount is
			return nil
		}
	}
}

func (k *compiler) visibleUnder(p string) bool {
	m := k.enclosing(p)
	return m != nil && m.Type == Bind
}

// denyPath resolves a deny_write/deny_read entry (globs allowed) and applies it.
func (k *compiler) denyPath(s Str, field string, to Access) {
	raw := strings.TrimSuffix(s.Value, "/**")
	wantDir := raw != s.Value || strings.HasSuffix(raw, "/") || filepath.Base(raw) == ".git"
	if strings.ContainsAny(raw, "*?[") {
		pattern := expandHome(raw, k.h.Home)
		if !filepath.IsAbs(pattern) {
			pattern = filepath.Join(k.ws, pattern)
		}
		matches, err := globAnyDepth(pattern)
		if err != nil {
			k.errorf(s.Pos, "filesystem.%s: bad glob %q: %v", field, s.Value, err)
			return
		}
		for _, m := range matches {
			if p, err := k.resolve(m, k.ws); err == nil && !k.throughLink(s, field, m, p) {
				k.deny(p, to, wantDir, k.origin(field, s.Pos))
			}
		}
		return
	}
	p, err := k.resolve(raw, k.ws)
	if err != nil {
		k.errorf(s.Pos, "filesystem.%s: %v", field, err)
		return
	}
	if k.throughLink(s, field, raw, p) {
		return
	}
	why := k.origin(field, s.Pos)
	k.deny(p, to, wantDir, why)
	if filepath.Base(p) == ".git" {
		k.gitdir(p, to, why)
	}
}

// deny lowers the access to p (and everything mounted inside it) to at most to. A path
// that does not exist yet inside a writable mount gets a placeholder, so the sandbox
// cannot create it.
func (k *compiler) deny(p string, to Access, wantDir bool, why string) {
	k.denyAt(p, p, to, wantDir, why)
}

// denyAt is deny for a path p that is read at the host path at (see [compiler.sys]).
func (k *compiler) denyAt(p, at string, to Access, wantDir bool, why string) {
	m := k.enclosing(p)
	if m == nil || m.Type != Bind || m.Access <= to {
		return // not visible, private tmpfs, or already at most that
	}
	for q, inner := range k.mounts {
		if q != p && within(q, p) {
			if to == Hidden {
				delete(k.mounts, q)
			} else if inner.Access > to {
				inner.Access = to
			}
		}
	}
	typ := Bind
	if to == Hidden {
		typ = Mask
	}
	if m.Access == ReadWrite {
		k.pinAncestors(m.Path, p)
	}
	st, err := os.Lstat(at)
	switch {
	case err == nil:
		k.mounts[p] = &Mount{Path: p, Type: typ, Access: to, Dir: st.IsDir(), Why: why}
	case errors.Is(err, fs.ErrNotExist) && m.Access == ReadWrite:
		create := PlaceholderFile
		if wantDir {
			create = PlaceholderDir
		}
		k.mounts[p] = &Mount{Path: p, Type: typ, Access: to, Dir: wantDir, Create: create, Why: why}
	}
}

// gitdir follows a .git file (a worktree or submodule pointer) to the git directory it
// names and protects that too, so that the pointer cannot be used to reach around the
// denial. For deny_write the real git directory becomes readable, so git still works.
func (k *compiler) gitdir(dotgit string, to Access, why string) {
	st, err := os.Lstat(dotgit)
	if err != nil || !st.Mode().IsRegular() {
		return
	}
	data, err := os.ReadFile(dotgit)
	if err != nil {
		return
	}
	line := strings.TrimSpace(strings.SplitN(string(data), "\n", 2)[0])
	target, ok := strings.CutPrefix(line, "gitdir:")
	if !ok {
		return
	}
	dirs := []string{strings.TrimSpace(target)}
	if common, err := os.ReadFile(filepath.Join(k.absFrom(dirs[0], filepath.Dir(dotgit)), "commondir")); err == nil {
		dirs = append(dirs, filepath.Join(k.absFrom(dirs[0], filepath.Dir(dotgit)), strings.TrimSpace(string(common))))
	}
	for _, d := range dirs {
		p, err := k.resolve(d, filepath.Dir(dotgit))
		if err != nil {
			continue
		}
		if !k.visibleUnder(p) {
			// A pointer is data the sandbox may have written: it never grants. The
			// git directory it names stays out of sight; git inside then fails.
			k.plan.Notes = append(k.plan.Notes, fmt.Sprintf("%s points at %s, outside what the contract makes visible: "+
				"it stays hidden (git in the sandbox fails); to use it, add it to filesystem.readable", dotgit, p))
			continue
		}
		k.deny(p, to, true, why+" (git directory named by "+dotgit+")")
	}
}

func (k *compiler) absFrom(p, base string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(base, p)
}

// resolve turns a contract path into an absolute host path with every symbolic link
// resolved. "~" means the caller's home; relative paths are relative to base. A path
// that does not exist is resolved as far as it exists.
func (k *compiler) resolve(raw, base string) (string, error) {
	if raw == "" {
		return "", errors.New("empty path")
	}
	if strings.HasPrefix(raw, "~") && k.h.Home == "" {
		return "", errors.New("~ used but the caller has no home directory")
	}
	p := expandHome(raw, k.h.Home)
	if strings.HasPrefix(p, "~") {
		return "", errors.New("~user paths are not supported; write the path out")
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(base, p)
	}
	return resolveExisting(filepath.Clean(p))
}

// resolveExisting resolves symbolic links in the longest existing prefix of p.
func resolveExisting(p string) (string, error) {
	return resolveExistingWith(p, filepath.EvalSymlinks)
}

func expandHome(p, home string) string {
	if p == "~" {
		return home
	}
	if strings.HasPrefix(p, "~/") {
		return filepath.Join(home, p[2:])
	}
	return p
}

// within reports whether p is dir or inside it (both clean and absolute).
func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// origin names the contract rule behind a mount, for explain and for denials.
func (k *compiler) origin(field string, p Pos) string {
	if p.Line == 0 {
		return "filesystem." + field + " (default)"
	}
	return "filesystem." + field + " at " + k.where(p)
}

// globAnyDepth returns the existing paths that match pattern, an absolute path in
// which "**" matches any number of directories (zero included), "*", "?" and "[...]"
// one name's characters. It never follows a symbolic link to a directory, so a match
// is always inside the pattern's own tree.
func globAnyDepth(pattern string) ([]string, error) {
	if !doublestar.ValidatePattern(filepath.ToSlash(pattern)) {
		return nil, errors.New("unbalanced brackets or braces, or a trailing backslash")
	}
	base, rel := doublestar.SplitPattern(filepath.ToSlash(pattern))
	rel = strings.TrimPrefix(rel, "/")
	if _, err := os.Stat(base); err != nil {
		return nil, nil // nothing there to match
	}
	matches, err := doublestar.Glob(os.DirFS(base), rel, doublestar.WithNoFollow())
	if err != nil {
		return nil, err
	}
	for i, m := range matches {
		matches[i] = filepath.Join(base, filepath.FromSlash(m))
	}
	return matches, nil
}

// throughLink reports (as an error at s) a denied path that is reached through a
// symbolic link inside a writable path: the sandbox could replace the link, and with
// it what the denial protects (a `.git` link to a repository outside the workspace
// left a writable `.git` whose config host git then ran). raw is the path as named,
// p resolved.
func (k *compiler) throughLink(s Str, field, raw, p string) bool {
	lex := filepath.Clean(expandHome(raw, k.h.Home))
	if !filepath.IsAbs(lex) {
		lex = filepath.Join(k.ws, lex)
	}
	if lex == p {
		return false
	}
	if m := k.enclosing(lex); m == nil || m.Access != ReadWrite {
		return false // the host's own link, out of the sandbox's reach
	}
	k.errorf(s.Pos, "filesystem.%s: %s is reached through a symbolic link (it resolves to %s), which the sandbox "+
		"could replace: name the real path, or replace the link with what it points to", field, lex, p)
	return true
}

// pinAncestors makes every directory between the writable mount root and the denied
// path p a mount point of its own (bound onto itself, still writable): a mount point
// cannot be renamed or removed, so `mv secrets s2` can no longer carry a denied
// secrets/key.pem out from under its mask, in this run or into the next. One that does
// not exist yet is made by the runner before the placeholder (PlaceholderParent):
// unpinned, `mv a a2 && mkdir -p a/b` would let the sandbox create a denied a/b/secret.
func (k *compiler) pinAncestors(root, p string) {
	for a := filepath.Dir(p); a != root && within(a, root); a = filepath.Dir(a) {
		if _, ok := k.mounts[a]; ok {
			continue
		}
		st, err := os.Lstat(a)
		if errors.Is(err, fs.ErrNotExist) {
			// Made for the denied path's placeholder: pinned all the same.
			k.mounts[a] = &Mount{Path: a, Type: Bind, Access: ReadWrite, Dir: true, Create: PlaceholderParent,
				Why: "pinned: made to hold a denied path, so it cannot be renamed away"}
			continue
		}
		if err != nil || !st.IsDir() {
			continue
		}
		k.mounts[a] = &Mount{Path: a, Type: Bind, Access: ReadWrite, Dir: true,
			Why: "pinned: holds a denied path, so it cannot be renamed away"}
	}
}
