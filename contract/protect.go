package contract

import (
	"os"
	"path/filepath"
	"strings"
)

// system applies the "@system" preset: the preset directories read-only, merged-/usr
// links mirrored, and the secrets inside them hidden. All of it is read under
// Host.Root.
func (k *compiler) system() {
	for _, p := range SystemPreset {
		st, err := k.sysLstat(p)
		if err != nil {
			continue
		}
		if st.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(k.sys(p))
			if err != nil {
				continue
			}
			k.plan.Links = append(k.plan.Links, Link{Path: p, Target: target})
			if resolved, err := k.sysEval(p); err == nil && !k.visibleUnder(resolved) {
				k.grantAt(resolved, k.sys(resolved), ReadOnly, true, "@system (target of "+p+")")
			}
			continue
		}
		k.grantAt(p, k.sys(p), ReadOnly, st.IsDir(), "@system")
	}
	for _, pattern := range systemSecrets {
		for _, m := range k.sysGlob(pattern) {
			k.denyAt(m, k.sys(m), Hidden, false, "@system never shows host secrets")
		}
	}
}

// protected is one path no contract rule can expose.
type protected struct {
	path     string
	dir      bool
	widening bool // may be exposed by a filesystem.widen entry
	why      string
	// to is the most the sandbox gets: Hidden (credential stores, host control
	// interfaces, cordon's state) or ReadOnly (files the host executes later).
	to Access
	// content is what the placeholder file holds when the path does not exist.
	content string
}

// protectedPaths lists the protected paths, each at its lexical location and, when a
// symbolic link leads elsewhere, at its resolved location too. It is computed once per
// Compile, resolving each parent directory once: it is on the hot path of every run.
func (k *compiler) protectedPaths() []protected {
	if k.protected != nil {
		return k.protected
	}
	type parent struct {
		sys bool
		dir string
	}
	parents := map[parent]string{}
	resolveParent := func(sys bool, dir string) string {
		key := parent{sys, dir}
		if r, ok := parents[key]; ok {
			return r
		}
		resolve := resolveExisting
		if sys {
			resolve = k.sysResolveExisting
		}
		r, err := resolve(dir)
		if err != nil {
			r = dir
		}
		parents[key] = r
		return r
	}
	out := []protected{}
	// add protects p and where it resolves; a system path (sys) is read under
	// Host.Root, the caller's paths where they are.
	add := func(sys bool, p string, dir, widening bool, why string) {
		p = filepath.Clean(p)
		out = append(out, protected{p, dir, widening, why, Hidden, ""})
		r := filepath.Join(resolveParent(sys, filepath.Dir(p)), filepath.Base(p))
		lstat, eval := os.Lstat, filepath.EvalSymlinks
		if sys {
			lstat, eval = k.sysLstat, k.sysEval
		}
		if st, err := lstat(r); err == nil && st.Mode()&os.ModeSymlink != 0 {
			if t, err := eval(r); err == nil {
				r = t
			}
		}
		if r != p {
			out = append(out, protected{r, dir, widening, why, Hidden, ""})
		}
	}
	if k.h.Home != "" {
		for _, rel := range mandatoryHome {
			add(false, filepath.Join(k.h.Home, rel), strings.HasSuffix(rel, "/"), true, "a credential store")
		}
	}
	for _, p := range mandatoryHost {
		add(true, p, false, true, "a host control interface")
	}
	for _, p := range k.h.Protect {
		if !filepath.IsAbs(p) { // as the caller's tools would read it
			p = filepath.Join(k.h.Cwd, p)
		}
		add(false, p, true, false, "cordon's own state")
	}
	for _, rel := range HostExecuted {
		// A missing one is kept absent by an empty directory, even for a file: git shows
		// no empty directory, so neither the agent's `git add -A` nor the host's `git
		// status` picks the placeholders up, and writing one fails all the same.
		out = append(out, protected{filepath.Join(k.ws, strings.TrimSuffix(rel, "/")), true, true,
			"run or obeyed by tools on the host later", ReadOnly, ""})
	}
	out = append(out, k.gitProtected()...)
	k.protected = out
	return out
}

// mandatory hides every protected path that a grant would expose, and refuses grants
// that name a protected path (or something inside one) directly.
func (k *compiler) mandatory(grants []grantRecord) {
	for _, pr := range k.protectedPaths() {
		for _, g := range grants {
			if pr.to == ReadOnly && g.field != "writable" {
				continue // readable it is anyway
			}
			if within(g.path, pr.path) {
				hint := "; to expose it, add a filesystem.widen entry with a why"
				if !pr.widening {
					hint = "; it can never be exposed"
				}
				what := g.path + " is inside " + pr.path + ", "
				if g.path == pr.path {
					what = g.path + " is "
				}
				k.errorf(g.pos, "filesystem.%s: %s%s%s", g.field, what, pr.why, hint)
			}
		}
		if pr.to == ReadOnly {
			why := "protected by default: " + pr.why
			if pr.path == filepath.Join(k.ws, ".git") && k.linkedGit(pr.path) {
				continue
			}
			k.deny(pr.path, ReadOnly, pr.dir, why)
			if m := k.mounts[pr.path]; m != nil && m.Create == PlaceholderFile {
				m.Content = pr.content
			}
			if pr.path == filepath.Join(k.ws, ".git") {
				k.gitdir(pr.path, ReadOnly, why)
			}
			continue
		}
		k.deny(pr.path, Hidden, pr.dir, "mandatory denial: "+pr.why)
	}
}

// linkedGit refuses a workspace whose .git is a symbolic link inside a writable
// workspace: the sandbox could replace the link, and with it what the protection
// covers (a .git of its own whose config host git then obeys).
func (k *compiler) linkedGit(dotgit string) bool {
	st, err := os.Lstat(dotgit)
	if err != nil || st.Mode()&os.ModeSymlink == 0 {
		return false
	}
	real, _ := filepath.EvalSymlinks(dotgit)
	return k.throughLink(Str{Value: ".git"}, "git", ".git", real)
}

// widen applies filesystem.widen entries: each must name a path inside a protected
// path that allows widening, and needs a why.
func (k *compiler) widen() {
	prot := k.protectedPaths()
	for _, w := range k.c.Filesystem.Widen {
		if w.Why == "" {
			k.errorf(w.Pos, "filesystem.widen: %q needs a why", w.Path.Value)
		}
		p, err := k.resolve(w.Path.Value, k.ws)
		if err != nil {
			k.errorf(w.Path.Pos, "filesystem.widen: %v", err)
			continue
		}
		var hit *protected
		for i := range prot {
			if within(p, prot[i].path) {
				hit = &prot[i]
				break
			}
		}
		switch {
		case hit == nil:
			k.errorf(w.Path.Pos, "filesystem.widen: %s is not a protected path; use filesystem.readable or writable", p)
			continue
		case !hit.widening:
			k.errorf(w.Path.Pos, "filesystem.widen: %s is %s and can never be exposed", p, hit.why)
			continue
		}
		st, err := os.Stat(p)
		if err != nil {
			k.errorf(w.Path.Pos, "filesystem.widen: %s does not exist", p)
			continue
		}
		where := k.where(w.Pos)
		// A widening replaces the mask for exactly this path; it is mounted on top.
		k.mounts[p] = &Mount{Path: p, Type: Bind, Access: w.Access, Dir: st.IsDir(), Why: "filesystem.widen " + where + ": " + w.Why}
		k.plan.Widenings = append(k.plan.Widenings, WideningPlan{Path: p, Access: w.Access, Why: w.Why, Where: where})
	}
}
