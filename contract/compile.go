package contract

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/cordonhq/cordon/egress/policy"
)

// DefaultTimeout is the per-command timeout when the contract sets none.
const DefaultTimeout = 60 * time.Second

// DefaultPath is the sandbox's PATH.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Host is what Compile needs to know about the machine and the caller.
type Host struct {
	Home   string                      // the caller's home directory
	Cwd    string                      // the caller's working directory
	Getenv func(string) (string, bool) // the caller's environment; nil means empty
	// Protect lists host paths that must never be visible in the sandbox and cannot be
	// widened (the audit root, cordon's run directories).
	Protect []string
	// Root is the directory the host's system files are read under: "/" for the
	// calling host. "@system"'s preset directories, their top-level links and the
	// secrets it hides, and the host-wide protected paths (engine sockets, /boot) are
	// looked up under it and named in the plan as the sandbox sees them (/usr,
	// /etc/shadow), so a plan depends on the layout it is given, not on the machine
	// compiling it. Links under a Root other than "/" are followed only within it.
	// Empty means "/".
	Root string
}

// HostFromOS describes the calling process.
func HostFromOS() (Host, error) {
	cwd, err := os.Getwd()
	if err != nil {
		return Host{}, fmt.Errorf("getting working directory: %w", err)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = ""
	}
	return Host{Home: home, Cwd: cwd, Getenv: os.LookupEnv, Root: "/"}, nil
}

// Default returns the built-in contract used when there is no cordon.yaml and no -c:
// the current directory writable except .git, @system readable, no network, no
// credentials.
func Default() *Contract {
	return &Contract{Version: SchemaVersion, Name: "default"}
}

// ForWorkspace makes c the contract of workspace ws, an absolute directory: a
// workspace key that is missing or relative is taken from ws instead of from the
// file's directory. `cordon diff` compiles a contract saved elsewhere this way, and the
// server a tenant's, which has no file at all.
func (c *Contract) ForWorkspace(ws string) {
	raw := c.Workspace.Value
	if raw == "" {
		raw = "."
	}
	if !filepath.IsAbs(raw) && !strings.HasPrefix(raw, "~") {
		c.Workspace.Value = filepath.Join(ws, raw)
	}
}

// builtinDigestInput identifies the built-in contract in digests.
const builtinDigestInput = "cordon built-in default contract v1"

// Compile validates c and turns it into a Plan for host h. Every problem is reported,
// joined; each is an [*Error] naming the contract position where one is known.
func Compile(c *Contract, h Host) (*Plan, error) {
	k := &compiler{c: c, h: h, mounts: map[string]*Mount{}, root: "/"}
	if h.Root != "" {
		k.root = filepath.Clean(h.Root)
		if !filepath.IsAbs(k.root) {
			k.errs = append(k.errs, fmt.Errorf("the host's root %q is not an absolute path", h.Root))
		}
	}
	k.plan = &Plan{
		Version:     PlanVersion,
		Name:        c.Name,
		Image:       c.Image,
		Egress:      []EgressRule{},
		Credentials: c.Credentials,
		Links:       []Link{},
		Widenings:   []WideningPlan{},
		Deny:        []DenyPattern{},
	}
	if c.File != "" {
		abs, err := filepath.Abs(c.File)
		if err == nil {
			k.plan.ContractFile = abs
		}
	}
	sum := sha256.Sum256([]byte(builtinDigestInput))
	if c.Source != nil {
		sum = sha256.Sum256(c.Source)
	}
	k.plan.ContractDigest = "sha256:" + hex.EncodeToString(sum[:])

	k.scalars()
	if k.workspace() {
		k.filesystem()
		k.pushPacksReadOnly() // after the gates (scalars) and the widenings
	}
	k.env()
	if len(k.errs) > 0 {
		return nil, errors.Join(k.errs...)
	}
	k.finishMounts()
	return k.plan, nil
}

// compiler holds the state of one Compile call.
type compiler struct {
	c      *Contract
	h      Host
	plan   *Plan
	errs   []error
	ws     string // resolved workspace
	root   string // Host.Root, clean; "/" when empty
	mounts map[string]*Mount

	protected []protected // computed once by protectedPaths
}

func (k *compiler) errorf(p Pos, format string, args ...any) {
	k.errs = append(k.errs, &Error{File: k.c.File, Pos: p, Msg: fmt.Sprintf(format, args...)})
}

func (k *compiler) where(p Pos) string { return Where(k.c.File, p) }

// scalars validates and copies everything that is not a path or the environment.
func (k *compiler) scalars() {
	c, p := k.c, k.plan
	if c.Version != SchemaVersion {
		k.errorf(c.VersionPos, "version: unsupported contract version %d (this cordon reads version %d)", c.Version, SchemaVersion)
	}
	switch c.Pull.Value {
	case "", "never":
		p.Pull = "never"
	case "missing":
		p.Pull = "missing"
	default:
		k.errorf(c.Pull.Pos, "pull: want never or missing, got %q", c.Pull.Value)
	}
	p.Timeout = Duration(DefaultTimeout)
	if c.Commands.Timeout > 0 {
		p.Timeout = Duration(c.Commands.Timeout)
	}
	for _, d := range c.Commands.Deny {
		dp, err := CompileDenyPattern(d.Value)
		if err != nil {
			k.errorf(d.Pos, "commands.deny: %v", err)
			continue
		}
		dp.Where = k.where(d.Pos)
		p.Deny = append(p.Deny, dp)
	}
	p.Limits = limitsPlan(c.Limits)
	if c.Limits.Memory > 0 && c.Limits.Memory < 4<<20 {
		k.errorf(c.Limits.Pos, "limits.memory: %d bytes is too small to start anything (minimum 4MiB)", c.Limits.Memory)
	}
	k.monitor()
	k.network()
	k.credentials()
	k.gates()
}

func (k *compiler) monitor() {
	m := k.c.Monitor
	mp := MonitorPlan{Mode: MonitorOff, OnViolation: ViolationAlert, Exec: []string{}}
	switch MonitorMode(m.Mode.Value) {
	case "", MonitorOff:
	case MonitorBestEffort, MonitorRequired:
		mp.Mode = MonitorMode(m.Mode.Value)
	default:
		k.errorf(m.Mode.Pos, "monitor.mode: want off, best-effort or required, got %q", m.Mode.Value)
	}
	switch OnViolation(m.OnViolation.Value) {
	case "", ViolationAlert:
	case ViolationKill:
		mp.OnViolation = ViolationKill
	default:
		k.errorf(m.OnViolation.Pos, "monitor.on_violation: want alert or kill, got %q", m.OnViolation.Value)
	}
	for _, e := range m.Exec {
		if e.Value == "" {
			k.errorf(e.Pos, "monitor.exec: empty entry")
			continue
		}
		if !doublestar.ValidatePattern(e.Value) {
			k.errorf(e.Pos, "monitor.exec: bad glob %q: unbalanced brackets or braces, or a trailing backslash", e.Value)
			continue
		}
		mp.Exec = append(mp.Exec, e.Value)
	}
	k.plan.Monitor = mp
}

func (k *compiler) credentials() {
	seen := map[string]bool{}
	for _, cr := range k.c.Credentials {
		if !envName().MatchString(cr.Name) {
			k.errorf(cr.Pos, "credentials.name: %q is not a valid variable name", cr.Name)
		}
		if seen[cr.Name] {
			k.errorf(cr.Pos, "credentials: %q is declared twice", cr.Name)
		}
		seen[cr.Name] = true
		switch cr.Provider {
		case "local", "exec", "github-app", "vault":
		default:
			k.errorf(cr.Pos, "credentials.provider: want local, exec, github-app or vault, got %q", cr.Provider)
		}
		switch cr.Deliver {
		case "", DeliverEnv, DeliverFile:
			if len(cr.Hosts) > 0 {
				k.errorf(cr.Pos, "credentials.hosts: only meaningful with deliver: proxy")
			}
		case DeliverGate:
			// hosts, when set, limit where the gate's git credential helper answers.
			for _, h := range cr.Hosts {
				if _, err := policy.Normalize(h); err != nil {
					k.errorf(cr.Pos, "credentials.hosts: %q: %v", h, err)
				}
			}
		case DeliverProxy:
			if len(cr.Hosts) == 0 {
				k.errorf(cr.Pos, "credentials.hosts: deliver: proxy needs at least one host")
			}
			for _, h := range cr.Hosts {
				if _, err := policy.Normalize(h); err != nil {
					k.errorf(cr.Pos, "credentials.hosts: %q: %v", h, err)
				}
			}
		default:
			k.errorf(cr.Pos, "credentials.deliver: want env, file, proxy or gate, got %q", cr.Deliver)
		}
	}
}

// sortMounts orders mounts so that a parent comes before anything inside it.
func sortMounts(ms []Mount) {
	sort.Slice(ms, func(i, j int) bool {
		di, dj := strings.Count(ms[i].Path, "/"), strings.Count(ms[j].Path, "/")
		if ms[i].Path == "/" || ms[j].Path == "/" {
			return ms[i].Path == "/" && ms[j].Path != "/"
		}
		if di != dj {
			return di < dj
		}
		return ms[i].Path < ms[j].Path
	})
}

func (k *compiler) finishMounts() {
	ms := make([]Mount, 0, len(k.mounts))
	for _, m := range k.mounts {
		ms = append(ms, *m)
	}
	sortMounts(ms)
	k.plan.Mounts = ms
	sort.Slice(k.plan.Links, func(i, j int) bool { return k.plan.Links[i].Path < k.plan.Links[j].Path })
}

// limitsPlan applies the default limits to what the contract left unset, and records
// which ones are defaults: a backend that cannot enforce a limit the contract asked
// for refuses the run, and says so loudly when it cannot enforce a default.
func limitsPlan(l Limits) LimitsPlan {
	p := LimitsPlan{Memory: l.Memory, Pids: l.Pids, CPU: l.CPU}
	if p.Memory == 0 {
		p.Memory, p.Defaulted = DefaultMemory, append(p.Defaulted, "memory")
	}
	if p.Pids == 0 {
		p.Pids, p.Defaulted = DefaultPids, append(p.Defaulted, "pids")
	}
	p.Memory, p.Pids = max(p.Memory, 0), max(p.Pids, 0)
	p.Tmpfs = p.Memory
	p.Diff = diffLimits(l.Diff)
	return p
}
