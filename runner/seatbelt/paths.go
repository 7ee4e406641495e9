package seatbelt

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// privateLinks are macOS's top-level symbolic links into /private. The kernel checks
// every access against the path with links resolved, so a rule naming /tmp would match
// nothing: the profile names /private/tmp.
var privateLinks = []string{"/tmp", "/var", "/etc"}

// resolve is what the kernel will compare for p: every symbolic link on the way resolved
// (on the host generating the profile: a link changed after generation is not
// followed), a part that does not exist yet joined as it is, and the /private links
// applied, which on a host other than macOS have no link to resolve.
func resolve(p string) string { return newResolver().resolve(p) }

// resolver resolves paths with a memo of the directories it has seen: one profile names
// many paths under the same few directories. It is not safe for concurrent use.
type resolver struct {
	dirs map[string]string
	sys  *sysView // nil: every path is read where it is
	hops int      // links followed through sys, bounded
}

func newResolver() *resolver { return &resolver{dirs: map[string]string{}} }

// sysView has a test describe the host's system files: a path is read under root
// unless it is inside one of own or on the way to one (the caller's files, read where
// they are), and links are followed within root.
type sysView struct {
	root string
	own  []string
}

func (v *sysView) reads(p string) bool {
	for _, o := range v.own {
		if within(p, o) || within(o, p) {
			return false
		}
	}
	return true
}

// maxHops bounds the links a sysView follows for one profile (a loop of links).
const maxHops = 255

func (r *resolver) resolve(p string) string {
	return privateOf(r.real(filepath.Clean(p)))
}

// real is p with its links resolved: its directory's, then its own if it is one (a
// chain of links, or one with ".." in it, is left to filepath.EvalSymlinks).
func (r *resolver) real(p string) string {
	if p == "/" || !filepath.IsAbs(p) {
		return p
	}
	if d, ok := r.dirs[p]; ok {
		return d
	}
	out := filepath.Join(r.real(filepath.Dir(p)), filepath.Base(p))
	if r.sys != nil && r.sys.reads(out) {
		out = r.follow(out)
	} else if st, err := os.Lstat(out); err == nil && st.Mode()&os.ModeSymlink != 0 {
		if t, err := filepath.EvalSymlinks(out); err == nil {
			out = t
		}
	}
	r.dirs[p] = out
	return out
}

// follow is out, whose directory is resolved, with its own link followed under the
// sysView's root.
func (r *resolver) follow(out string) string {
	at := filepath.Join(r.sys.root, out)
	st, err := os.Lstat(at)
	if err != nil || st.Mode()&os.ModeSymlink == 0 || r.hops >= maxHops {
		return out
	}
	t, err := os.Readlink(at)
	if err != nil {
		return out
	}
	r.hops++
	if !filepath.IsAbs(t) {
		t = filepath.Join(filepath.Dir(out), t)
	}
	return r.real(filepath.Clean(t))
}

// privateOf maps /tmp, /var and /etc (and what is under them) to /private.
func privateOf(p string) string {
	for _, l := range privateLinks {
		if p == l || strings.HasPrefix(p, l+"/") {
			return "/private" + p
		}
	}
	return p
}

// within reports whether p is dir or inside it.
func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// ancestors returns the directories above each path, sorted and without duplicates:
// their metadata must be readable for a program to find its way to what it may use
// (getcwd, realpath, a stat of each component).
func ancestors(paths []string) []string {
	seen := map[string]bool{}
	for _, p := range paths {
		for d := filepath.Dir(p); ; d = filepath.Dir(d) {
			seen[d] = true
			if d == "/" || d == "." {
				break
			}
		}
	}
	delete(seen, ".")
	out := make([]string, 0, len(seen))
	for d := range seen {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}
