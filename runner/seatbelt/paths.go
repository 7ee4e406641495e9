package seatbelt

import (
	"path/filepath"
	"sort"
	"strings"
)

// privateLinks are macOS's top-level symbolic links into /private. The kernel checks
// every access against the path with links resolved, so a rule naming /tmp would match
// nothing: the profile names /private/tmp.
var privateLinks = []string{"/tmp", "/var", "/etc"}

// resolve is what the kernel will compare for p: every symbolic link of its longest
// existing prefix resolved (filepath.EvalSymlinks, on the host generating the profile:
// a link changed after generation is not followed), the rest joined as is (a path that
// does not exist yet), and the /private links applied, which on a host other than macOS
// have no link to resolve.
func resolve(p string) string {
	p = filepath.Clean(p)
	rest := ""
	for cur := p; ; {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			p = filepath.Join(r, rest)
			break
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			break
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
	return privateOf(p)
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
