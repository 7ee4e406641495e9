package seatbelt

import (
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/cordonhq/cordon/contract"
)

// Params are the run-time facts a profile needs beyond the plan.
type Params struct {
	// ProxyPort is the loopback TCP port of the run's egress proxy: the one address the
	// sandbox may connect to. Zero is allowed only for a plan without egress rules.
	ProxyPort int
	// RunDir is the run's private host directory. The plan's tmpfs mounts (the private
	// $HOME and /tmp) have no equivalent on macOS: each becomes a directory under it,
	// listed in [Profile.Dirs], that the runner creates empty and removes after the run.
	RunDir string
	// Secrets, when set, is the directory of the run's credential files (in RunDir; see
	// [SecretsDirName]): the sandbox may read it, not write it.
	Secrets string
	// Control and Init, in a session, are the host's control socket (in RunDir) and
	// cordon's binary, run as the session's process 1 under the profile: the sandbox
	// may connect to the one and execute the other (session.go).
	Control, Init string
	// Spill, in a session, is the directory of the whole output of commands whose
	// output was cut: readable, at its host path (nothing is mounted).
	Spill string
	// Gate, when the plan has gates, is the host's gate socket (in RunDir): the sandbox
	// may connect to it and run `cordon gate` from a directory standing in for
	// sandbox.GateBinDir, which holds a link to Init (session.go).
	Gate string

	sys *sysView // tests: the host's system files (nil: the machine's own)
}

// PrivateDir is a directory the runner creates for the sandbox in place of a tmpfs.
type PrivateDir struct {
	For  string // the plan's tmpfs path ($HOME, /tmp)
	Host string // the directory under Params.RunDir standing in for it
}

// Profile is a generated SBPL profile and what the runner prepares for it.
type Profile struct {
	SBPL string
	Dirs []PrivateDir
}

// Operation sets the rules grant or deny.
var (
	opsRead      = []string{"file-read*", "file-map-executable", "process-exec"}
	opsReadWrite = []string{"file-read*", "file-write*", "file-map-executable", "process-exec"}
	opsWrite     = []string{"file-write*"}
	opsAll       = opsReadWrite
)

// Generate writes the SBPL profile for plan. It is pure but for the host's symbolic links,
// which it resolves (see resolve): the same plan, params and host give the same text.
// A path the profile cannot express is an error wrapping [ErrInexpressible].
func Generate(plan *contract.Plan, p Params) (*Profile, error) {
	if len(plan.Egress) > 0 && (p.ProxyPort <= 0 || p.ProxyPort > 65535) {
		return nil, fmt.Errorf("seatbelt profile: the plan allows egress but the proxy port is %d", p.ProxyPort)
	}
	if p.RunDir == "" || !filepath.IsAbs(p.RunDir) {
		return nil, fmt.Errorf("seatbelt profile: run directory %q is not absolute", p.RunDir)
	}
	g := &gen{plan: plan, params: p, res: newResolver()}
	g.res.sys = p.sys
	g.runDir = g.res.resolve(p.RunDir)
	g.w.b.Grow(64 << 10) // the example contracts give 20-40 KB
	g.header()
	g.processes()
	g.services()
	g.fileSystem()
	g.network()
	g.session()
	g.gates()
	text, err := g.w.text()
	if err != nil {
		return nil, fmt.Errorf("seatbelt profile: %w", err)
	}
	return &Profile{SBPL: text, Dirs: g.dirs}, nil
}

// gen is the state of one Generate call.
type gen struct {
	w      writer
	plan   *contract.Plan
	params Params
	res    *resolver
	runDir string
	dirs   []PrivateDir
	// writable are the resolved paths granted for writing so far, in rule order.
	writable []string
}

func (g *gen) header() {
	w := &g.w
	name := g.plan.Name
	if name == "" {
		name = "(unnamed)"
	}
	w.comment("cordon seatbelt profile for contract %s (%s); generated, do not edit.", name, g.plan.ContractDigest)
	w.comment("SBPL decides each operation by the LAST rule that matches it, so every carve-out")
	w.comment("follows the grant it narrows, and a parent's rule precedes its children's.")
	w.comment("Paths are as the kernel compares them: symbolic links resolved when the profile was")
	w.comment("written (on the host that wrote it), /tmp, /var and /etc as /private/... .")
	w.raw("(version 1)")
	w.raw("(deny default)")
	w.blank()
}

func (g *gen) processes() {
	w := &g.w
	w.comment("Processes: fork freely; exec only what is readable (below); signal and inspect")
	w.comment("only processes in this sandbox.")
	w.raw("(allow process-fork)")
	w.raw("(allow signal (target same-sandbox))")
	w.raw("(allow process-info* (target same-sandbox))")
	w.blank()
}

func (g *gen) services() {
	w := &g.w
	w.comment("sysctls the runtimes of git, go, node, python, make and cc read (system.go says which).")
	w.raw("(allow sysctl-read")
	for _, s := range sysctls {
		w.raw("  (sysctl-name " + quote(s) + ")")
	}
	for _, s := range sysctlPrefixes {
		w.raw("  (sysctl-name-prefix " + quote(s) + ")")
	}
	w.raw(")")
	w.comment("Mach services, each for:")
	for _, m := range machServices {
		w.comment("  %s: %s", m.path, m.why)
	}
	w.raw("(allow mach-lookup")
	for _, m := range machServices {
		w.raw("  (global-name " + quote(m.path) + ")")
	}
	w.raw(")")
	w.comment("node and libuv take a power assertion through this IOKit client (with the service above).")
	w.raw(`(allow iokit-open (iokit-registry-entry-class "RootDomainUserClient"))`)
	w.comment("POSIX semaphores: Python's multiprocessing locks.")
	w.raw("(allow ipc-posix-sem)")
	w.comment("Pseudo-terminals: interactive shells, Python's pty, script(1).")
	w.raw("(allow pseudo-tty)")
	w.raw(`(allow file-read* file-write* file-ioctl (literal "/dev/ptmx") (regex #"^/dev/ttys[0-9]+$"))`)
	w.blank()
}

// network allows exactly the run's egress proxy, or nothing.
func (g *gen) network() {
	w := &g.w
	if len(g.plan.Egress) == 0 {
		w.comment("Network: none. The contract allows no egress; every connection is denied by default.")
		return
	}
	w.comment("Network: only the run's egress proxy on loopback port %d, which applies network.allow.", g.params.ProxyPort)
	w.comment("Every other address and port (other loopback services included) is denied by default.")
	w.rule("allow", []string{"network-outbound"}, filter{"remote-ip", "localhost:" + strconv.Itoa(g.params.ProxyPort)})
}

// privateDir names the directory standing in for the i-th tmpfs, at path in the plan.
func (g *gen) privateDir(path string, i int) string {
	switch path {
	case g.plan.Home:
		return filepath.Join(g.runDir, "home")
	case "/tmp", "/private/tmp":
		return filepath.Join(g.runDir, "tmp")
	}
	return filepath.Join(g.runDir, "tmpfs-"+strconv.Itoa(i))
}
