package seatbelt

import (
	"path/filepath"

	"github.com/cordonhq/cordon/contract"
)

// fileSystem writes the file rules, in an order that the last-match rule makes mean what
// the plan says: the metadata of the directories on the way, the system's own paths,
// the plan's mounts parent before child (each grant, then the carve-outs inside it), the
// mandatory denials, and last the run's private directories.
func (g *gen) fileSystem() {
	mounts := g.resolvedMounts()
	g.pathMetadata(mounts)
	g.systemPaths()
	g.links()
	g.w.comment("The contract's file system, parent before child (Plan.Mounts order).")
	for _, m := range mounts {
		g.mount(m)
	}
	g.w.blank()
	g.mandatory()
	g.privateDirs(mounts)
}

// resolvedMounts is the plan's mounts with each path as the kernel will compare it.
// Resolving keeps the plan's order: a link inside the workspace that points elsewhere was
// already resolved by contract.Compile, and resolving never moves a child above its parent
// (both resolve through the same links).
func (g *gen) resolvedMounts() []contract.Mount {
	out := make([]contract.Mount, len(g.plan.Mounts))
	for i, m := range g.plan.Mounts {
		m.Path = g.res.resolve(m.Path)
		out[i] = m
	}
	return out
}

// pathMetadata lets every directory above a granted path be stat'ed (not listed, not
// read): without it getcwd, realpath and a shell's cd fail on the way down.
func (g *gen) pathMetadata(mounts []contract.Mount) {
	var granted []string
	for _, m := range mounts {
		if m.Type != contract.Mask {
			granted = append(granted, m.Path)
		}
	}
	for _, s := range systemRead {
		granted = append(granted, s.path)
	}
	granted = append(granted, g.runDir+"/x")
	var fs []filter
	for _, d := range ancestors(granted) {
		fs = append(fs, literal(d))
	}
	g.w.comment("The directories above every granted path: metadata only (stat), for getcwd and realpath.")
	g.w.rule("allow", []string{"file-read-metadata"}, fs...)
	g.w.comment("The links /tmp, /var and /etc themselves (macOS's links into /private).")
	g.w.rule("allow", []string{"file-read-metadata"}, literal("/tmp"), literal("/var"), literal("/etc"))
	g.w.blank()
}

// systemPaths grants what the loader, the frameworks and the shells need.
func (g *gen) systemPaths() {
	w := &g.w
	w.comment("System paths every program needs, whatever the contract says (read only):")
	for _, s := range systemRead {
		w.comment("  %s: %s", s.path, s.why)
		w.rule("allow", opsRead, subpath(s.path))
	}
	w.comment("Devices:")
	for _, s := range devRead {
		w.comment("  %s: %s", s.path, s.why)
		w.rule("allow", []string{"file-read*"}, literal(s.path))
	}
	for _, s := range devReadWrite {
		w.comment("  %s: %s", s.path, s.why)
		f := literal(s.path)
		if s.path == "/dev/fd" {
			f = subpath(s.path)
		}
		w.rule("allow", []string{"file-read*", "file-write*", "file-ioctl"}, f)
	}
	w.blank()
}

// links grants the targets of the plan's links (merged-/usr links on Linux, /etc ->
// private/etc on macOS): without a mount namespace the host's own links are what the
// sandbox follows, and the kernel checks their targets.
func (g *gen) links() {
	if len(g.plan.Links) == 0 {
		return
	}
	g.w.comment("Targets of @system's top-level links (read only).")
	for _, l := range g.plan.Links {
		target := l.Target
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(l.Path), target)
		}
		g.w.comment("  %s -> %s", l.Path, l.Target)
		g.w.rule("allow", opsRead, subpath(g.res.resolve(target)))
	}
	g.w.blank()
}

// mount writes the rules of one plan mount.
func (g *gen) mount(m contract.Mount) {
	w := &g.w
	if m.Type == contract.Tmpfs {
		w.comment("tmpfs %s: %s (hidden here; the run's stand-in is granted at the end)", m.Path, m.Why)
	} else {
		w.comment("%s %s: %s", m.Access, m.Path, m.Why)
	}
	switch {
	case m.Type == contract.Mask:
		w.deny(opsAll, m.Path)
	case m.Type == contract.Tmpfs:
		// The tmpfs hides what is there; its stand-in is granted at the end.
		w.deny(opsAll, m.Path)
	case m.Access == contract.ReadWrite:
		w.rule("allow", opsReadWrite, subpath(m.Path))
		g.writable = append(g.writable, m.Path)
	case m.Access == contract.ReadOnly:
		w.rule("allow", opsRead, subpath(m.Path))
		if g.insideWritable(m.Path) {
			w.deny(opsWrite, m.Path)
		}
	}
}

func (g *gen) insideWritable(p string) bool {
	for _, d := range g.writable {
		if within(p, d) {
			return true
		}
	}
	return false
}

// mandatory denies the credential stores and host interfaces of contract/system.go and
// macOS's own, except what a widening in the plan deliberately exposes. They are hidden
// already unless a grant contains them; this makes it explicit and immune to a grant.
// The run directory is denied the same way.
func (g *gen) mandatory() {
	var widened []string
	for _, wp := range g.plan.Widenings {
		widened = append(widened, g.res.resolve(wp.Path))
	}
	var paths []string
	if g.plan.Home != "" {
		for _, rel := range contract.MandatoryHome() {
			paths = append(paths, filepath.Join(g.plan.Home, rel))
		}
	}
	paths = append(paths, contract.MandatoryHost()...)
	for _, p := range macSecrets {
		if !filepath.IsAbs(p) {
			if g.plan.Home == "" {
				continue
			}
			p = filepath.Join(g.plan.Home, p)
		}
		paths = append(paths, p)
	}
	g.w.comment("Mandatory denials: credential stores, engine sockets, kernel and cordon state,")
	g.w.comment("macOS keychains and account databases (contract/system.go, system.go).")
	seen := map[string]bool{}
outer:
	for _, p := range paths {
		p = g.res.resolve(p)
		if seen[p] {
			continue
		}
		seen[p] = true
		for _, wd := range widened {
			if within(wd, p) || within(p, wd) {
				g.w.comment("  not %s: the contract widens %s", p, wd)
				continue outer
			}
		}
		g.w.deny(opsAll, p)
	}
	g.w.comment("The run directory is the runner's (its control and gate sockets, the gate link, the")
	g.w.comment("spill, the secrets), even inside a grant of the contract: what the sandbox may use")
	g.w.comment("of it is granted after (its stat stays, for getcwd and realpath).")
	g.w.deny(opsAll, g.runDir)
	g.w.rule("allow", []string{"file-read-metadata"}, literal(g.runDir))
	g.w.blank()
}

// privateDirs grants the directories standing in for the plan's tmpfs mounts, last: they
// are the run's own, created empty, and nothing of the host is inside them.
func (g *gen) privateDirs(mounts []contract.Mount) {
	for i, m := range mounts {
		if m.Type != contract.Tmpfs {
			continue
		}
		host := g.privateDir(g.plan.Mounts[i].Path, len(g.dirs))
		g.dirs = append(g.dirs, PrivateDir{For: g.plan.Mounts[i].Path, Host: host})
		g.w.comment("The run's private directory standing in for %s (%s).", m.Path, m.Why)
		g.w.rule("allow", opsReadWrite, subpath(host))
	}
	if g.params.Secrets != "" {
		g.w.comment("The run's credential files (deliver: file) and CA bundle: read only.")
		g.w.rule("allow", []string{"file-read*"}, subpath(g.res.resolve(g.params.Secrets)))
	}
}
