package monitor

import (
	"path/filepath"
	"strings"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/paths"
)

// The sandbox's sockets. ProxyAddr, its one way out, is the egress proxy's listener
// inside it, for every process. GateSocket, in a run with gates, is where `cordon gate
// NAME` asks, for every process too. ControlSocket is process 1's alone: it dials it
// once, before any command runs, to hand the proxy's listener over (cordon accepts that
// one connection and closes the socket, so a command's connect there finds nobody);
// process 1 is not watched ([Options.Nested]), so every connect to it the monitor sees
// is a deviation, [CatConnectControl]. They must match sandbox.ProxyAddr,
// sandbox.GatePath and sandbox.ControlPath (monitor does not import runner: runner
// imports it).
const (
	ProxyAddr     = "127.0.0.1:3128"
	GateSocket    = paths.SandboxGate
	ControlSocket = paths.SandboxControl
)

// Profile is what a run's processes are expected to do; whatever else they do is a
// deviation. It is a pure value: build it with [FromPlan], adjust it if needed, and pass
// it to [Start].
type Profile struct {
	// Paths grant access by path: of the rules whose Path is the path or one of its
	// parents, the longest decides (the last one on a tie). A path under no rule is
	// outside the readable set, except a directory above a rule ("/", "/home"), which
	// the sandbox shows as a bare mount point and may be read.
	Paths []PathRule

	// Links are symbolic links the sandbox mirrors (/bin -> usr/bin); a path through
	// one is compared as its target.
	Links []contract.Link

	// Exec lists the allowed executables: a glob containing "/" matches the executed
	// path, any other glob its base name. An exec of a shell, an interpreter or a
	// network relay (see [Risky]) that no entry matches is a deviation; other programs
	// are not compared.
	Exec []string

	// Connect lists the allowed connect destinations, as "IP:PORT" ("[::1]:80" for
	// IPv6) or "unix:/path". Any other connect is a deviation.
	Connect []string
}

// PathRule grants access to a path and everything below it.
type PathRule struct {
	Path   string          `json:"path"`
	Access contract.Access `json:"access"`
	Why    string          `json:"why"`
}

// sandboxPaths are the parts of the sandbox's file system that every backend provides
// and a Plan does not list (bwrap --dev and --proc, cordon's own files), plus the
// absent /sys files that language runtimes probe at start (Go and glibc read CPU and
// cgroup limits, Go the huge page size): reading them is not a deviation.
var sandboxPaths = []PathRule{
	{"/dev", contract.ReadOnly, "sandbox /dev"},
	{"/dev/null", contract.ReadWrite, "sandbox /dev"},
	{"/dev/zero", contract.ReadWrite, "sandbox /dev"},
	{"/dev/full", contract.ReadWrite, "sandbox /dev"},
	{"/dev/random", contract.ReadWrite, "sandbox /dev"},
	{"/dev/urandom", contract.ReadWrite, "sandbox /dev"},
	{"/dev/tty", contract.ReadWrite, "sandbox /dev"},
	{"/dev/ptmx", contract.ReadWrite, "sandbox /dev"},
	{"/dev/pts", contract.ReadWrite, "sandbox /dev"},
	{"/dev/shm", contract.ReadWrite, "sandbox /dev"},
	{"/dev/stdin", contract.ReadWrite, "sandbox /dev"},
	{"/dev/stdout", contract.ReadWrite, "sandbox /dev"},
	{"/dev/stderr", contract.ReadWrite, "sandbox /dev"},
	{"/dev/fd", contract.ReadWrite, "sandbox /dev"},
	{"/proc", contract.ReadOnly, "sandbox /proc"},
	{"/proc/self", contract.ReadWrite, "sandbox /proc: the process itself"},
	{"/proc/thread-self", contract.ReadWrite, "sandbox /proc: the thread itself"},
	{"/proc/kcore", contract.Hidden, "kernel memory"},
	{"/proc/kallsyms", contract.Hidden, "kernel symbol addresses"},
	{"/proc/kmsg", contract.Hidden, "kernel log"},
	{"/proc/sysrq-trigger", contract.Hidden, "kernel control"},
	{paths.SandboxDir, contract.ReadOnly, "cordon's init, secrets and sockets"},
	{paths.SandboxDir + "/" + paths.InitSpec, contract.Hidden, "process 1's own: its spec (containers)"},
	{paths.SandboxDir + "/" + paths.InitEnv, contract.Hidden, "process 1's own: its environment pipe (containers)"},
	{paths.SandboxDir + "/" + paths.InitStatus, contract.Hidden, "process 1's own: its status pipe (containers)"},
	{"/sys/devices/system/cpu", contract.ReadOnly, "runtime probe: CPU topology"},
	{"/sys/devices/system/node", contract.ReadOnly, "runtime probe: NUMA nodes"},
	{"/sys/kernel/mm/transparent_hugepage", contract.ReadOnly, "runtime probe: huge pages"},
	{"/sys/fs/cgroup", contract.ReadOnly, "runtime probe: cgroup limits"},
}

// sandboxLinks are the links every backend's /dev has besides those into /proc/self
// (magicDirs): bwrap --dev and runc both make /dev/core a link to /proc/kcore, which
// /dev's read-only rule would otherwise let through, in the kernel's filter too.
var sandboxLinks = []contract.Link{
	{Path: "/dev/core", Target: "/proc/kcore"},
}

// FromPlan returns the profile of a compiled contract: the plan's mounts (readable,
// writable and hidden sets) over the sandbox's own files, its links, monitor.exec, and
// as connect destinations the egress proxy's address and, when the plan has gates, the
// gate socket.
func FromPlan(p *contract.Plan) Profile {
	prof := Profile{
		Paths:   append([]PathRule(nil), sandboxPaths...),
		Links:   append(append([]contract.Link(nil), sandboxLinks...), p.Links...),
		Exec:    append([]string(nil), p.Monitor.Exec...),
		Connect: []string{ProxyAddr},
	}
	if len(p.Gates) > 0 {
		prof.Connect = append(prof.Connect, "unix:"+GateSocket)
	}
	for _, m := range p.Mounts {
		prof.Paths = append(prof.Paths, PathRule{Path: m.Path, Access: m.Access, Why: m.Why})
	}
	return prof
}

// resolve cleans an absolute path and rewrites a prefix that is a process's root link
// in /proc (proclink.go) or one of the links.
func (p *Profile) resolve(path string) string {
	path = throughRoot(filepath.Clean(path))
	for _, l := range p.Links {
		if rest, ok := under(path, l.Path); ok {
			target := l.Target
			if !filepath.IsAbs(target) {
				target = filepath.Join(filepath.Dir(l.Path), target)
			}
			return filepath.Join(target, rest)
		}
	}
	return path
}

// rule returns the rule that decides path, or nil.
func (p *Profile) rule(path string) *PathRule {
	var best *PathRule
	for i := range p.Paths {
		r := &p.Paths[i]
		if _, ok := under(path, r.Path); ok && (best == nil || len(r.Path) >= len(best.Path)) {
			best = r
		}
	}
	return best
}

// aboveRule reports whether dir is a strict parent of some rule's path.
func (p *Profile) aboveRule(dir string) bool {
	for _, r := range p.Paths {
		if rest, ok := under(r.Path, dir); ok && rest != "" {
			return true
		}
	}
	return false
}

// under reports whether path is dir or below it, and returns the rest.
func under(path, dir string) (string, bool) {
	if dir == "/" {
		return strings.TrimPrefix(path, "/"), strings.HasPrefix(path, "/")
	}
	if path == dir {
		return "", true
	}
	if strings.HasPrefix(path, dir) && path[len(dir)] == '/' {
		return path[len(dir)+1:], true
	}
	return "", false
}

// checkPath decides an access to an absolute, resolved path. It returns "" when the
// access is expected, else the broken rule, the category of the deviation (what the
// workload is shown: nothing of the contract's wording) and the reason in full (which
// names the contract path and its why).
func (p *Profile) checkPath(path string, write bool) (rule Rule, category, reason string) {
	r := p.rule(path)
	switch {
	case r == nil && write:
		return RuleWrite, CatWriteOutside, CatWriteOutside
	case r == nil && p.aboveRule(path):
		return "", "", ""
	case r == nil:
		return RuleRead, CatReadOutside, CatReadOutside
	case r.Access == contract.Hidden && write:
		rule, category = RuleWrite, CatWriteHidden
	case r.Access == contract.Hidden:
		rule, category = RuleRead, CatReadHidden
	case r.Access == contract.ReadOnly && write:
		rule, category = RuleWrite, CatWriteReadOnly
	default:
		return "", "", ""
	}
	return rule, category, category + " (" + r.Path + ": " + r.Why + ")"
}
