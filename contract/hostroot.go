package contract

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// The host's system files are read under Host.Root: a system path p (as the sandbox
// sees it, "/etc/shadow") is looked up at sys(p), and what a lookup resolves to is named
// again as a system path by unsys. With the root "/" both are the identity, so a plan
// compiled for the calling host names what it always named.

// sys is where the system path p is read on this machine.
func (k *compiler) sys(p string) string { return filepath.Join(k.root, p) }

// unsys names a path read under the root as a system path; a path outside the root (a
// link under a test's root leading out of it) is an error.
func (k *compiler) unsys(r string) (string, error) {
	if k.root == "/" {
		return r, nil
	}
	rel, err := filepath.Rel(k.root, r)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("%s is outside the host's root %s", r, k.root)
	}
	return filepath.Join("/", rel), nil
}

// sysLstat is os.Lstat of the system path p.
func (k *compiler) sysLstat(p string) (fs.FileInfo, error) { return os.Lstat(k.sys(p)) }

// sysEval is filepath.EvalSymlinks of the system path p, named as a system path.
func (k *compiler) sysEval(p string) (string, error) {
	r, err := filepath.EvalSymlinks(k.sys(p))
	if err != nil {
		return "", err
	}
	return k.unsys(r)
}

// sysGlob is filepath.Glob of a system path pattern, each match named as a system path.
func (k *compiler) sysGlob(pattern string) []string {
	matches, _ := filepath.Glob(k.sys(pattern))
	out := matches[:0]
	for _, m := range matches {
		if p, err := k.unsys(m); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// sysResolveExisting is resolveExisting for a system path.
func (k *compiler) sysResolveExisting(p string) (string, error) {
	return resolveExistingWith(p, k.sysEval)
}

// resolveExistingWith resolves symbolic links, with eval, in the longest existing
// prefix of p.
func resolveExistingWith(p string, eval func(string) (string, error)) (string, error) {
	var rest []string
	for q := p; ; q = filepath.Dir(q) {
		r, err := eval(q)
		if err == nil {
			for i := len(rest) - 1; i >= 0; i-- {
				r = filepath.Join(r, rest[i])
			}
			return r, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		if q == "/" {
			return p, nil
		}
		rest = append(rest, filepath.Base(q))
	}
}
