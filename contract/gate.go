package contract

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"text/template"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/cordonhq/cordon/internal/strictyaml"
)

// DefaultGateTimeout bounds a gate's operation when the contract sets no timeout.
const DefaultGateTimeout = 5 * time.Minute

// Deliver says how a credential reaches what uses it (credentials.deliver).
type Deliver string

// Deliver values. The zero value means DeliverEnv.
const (
	DeliverEnv   Deliver = "env"   // an environment variable of the sandbox
	DeliverFile  Deliver = "file"  // a file in a private directory of the sandbox
	DeliverProxy Deliver = "proxy" // swapped into requests by the egress proxy; the sandbox holds a placeholder
	// DeliverGate is the deliver value of a credential that only a gate uses: it is
	// never issued at run start and never reaches the sandbox; the gate service mints
	// it for each approved operation and revokes it right after.
	DeliverGate Deliver = "gate"
)

func (d Deliver) String() string {
	if d == "" {
		return string(DeliverEnv)
	}
	return string(d)
}

// Gate approval policies ([Gate.Approve]).
const (
	ApproveHuman = "human" // a person approves or denies each request (the default)
	ApproveDeny  = "deny"  // every request is refused at once
)

// GateSpec is one entry of the contract's gates section, as decoded.
type GateSpec struct {
	Name       Str
	Run        []Str // argv; each element a text/template with the field .Run
	Credential Str   // "" for none
	Approve    Str   // human (default) | deny
	Why        string
	Timeout    time.Duration // zero: DefaultGateTimeout
	Pos        Pos
}

// Gate is a compiled gate: an operation the sandbox may ask for and a person approves,
// which then runs outside the sandbox (package gate).
type Gate struct {
	Name string `json:"name"`
	// Run is the operation's argv, each element a text/template whose only field is
	// {{.Run}}, the run (or session) id. Use [Gate.Argv] to expand it.
	Run     []string `json:"run"`
	Approve string   `json:"approve"` // ApproveHuman or ApproveDeny
	Why     string   `json:"why"`
	Timeout Duration `json:"timeout"`
	// Credential is a copy of the credentials entry (deliver: gate) the operation gets,
	// or nil.
	Credential *Credential `json:"credential,omitempty"`
	Pos        Pos         `json:"pos"`
}

// gateVars is what a gate's run templates see.
type gateVars struct {
	Run string
}

// Argv expands the gate's run templates for run id run.
func (g Gate) Argv(run string) ([]string, error) {
	out := make([]string, len(g.Run))
	for i, s := range g.Run {
		v, err := expandGateArg(s, run)
		if err != nil {
			return nil, fmt.Errorf("gate %s: run[%d]: %w", g.Name, i, err)
		}
		out[i] = v
	}
	return out, nil
}

func expandGateArg(s, run string) (string, error) {
	t, err := template.New("run").Option("missingkey=error").Parse(s)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, gateVars{Run: run}); err != nil {
		return "", err
	}
	return b.String(), nil
}

var unknownField = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`can't evaluate field (\w+)`) })

var gateName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`) })

func (d *decoder) gates(n *yaml.Node, c *Contract) {
	c.Gates = []GateSpec{}
	d.List(n, "gates", func(item *yaml.Node) {
		g := GateSpec{Pos: strictyaml.PosOf(item)}
		d.Mapping(item, "gates entry",
			strictyaml.Field{Name: "name", Decode: func(v *yaml.Node) { g.Name = d.strPos(v, "gates.name") }},
			strictyaml.Field{Name: "run", Decode: func(v *yaml.Node) { g.Run = d.strList(v, "gates.run") }},
			strictyaml.Field{Name: "credential", Decode: func(v *yaml.Node) { g.Credential = d.strPos(v, "gates.credential") }},
			strictyaml.Field{Name: "approve", Decode: func(v *yaml.Node) { g.Approve = d.strPos(v, "gates.approve") }},
			strictyaml.Field{Name: "why", Decode: func(v *yaml.Node) { g.Why = d.Str(v, "gates.why") }},
			strictyaml.Field{Name: "timeout", Decode: func(v *yaml.Node) { g.Timeout = d.duration(v, "gates.timeout") }},
		)
		c.Gates = append(c.Gates, g)
	})
}

// gates validates the gates section and the deliver: gate credentials, and fills
// Plan.Gates. Credentials with deliver: gate are taken out of Plan.Credentials.
func (k *compiler) gates() {
	byName := map[string]Credential{}
	used := map[string]bool{}
	var start []Credential
	for _, cr := range k.c.Credentials {
		byName[cr.Name] = cr
		if cr.Deliver != DeliverGate {
			start = append(start, cr)
		}
	}
	if start == nil {
		start = []Credential{}
	}
	k.plan.Credentials = start
	k.plan.Gates = []Gate{}
	seen := map[string]Pos{}
	for _, gs := range k.c.Gates {
		g, ok := k.gate(gs, byName, seen)
		if gs.Credential.Value != "" {
			used[gs.Credential.Value] = true
		}
		if ok {
			k.plan.Gates = append(k.plan.Gates, g)
		}
	}
	for _, cr := range k.c.Credentials {
		if cr.Deliver == DeliverGate && !used[cr.Name] {
			k.errorf(cr.Pos, "credentials: %s has deliver: gate but no gate names it (add credential: %s to a gate, or remove it)", cr.Name, cr.Name)
		}
	}
}

// gate checks one gate; ok is false when it has problems (all reported).
func (k *compiler) gate(gs GateSpec, creds map[string]Credential, seen map[string]Pos) (Gate, bool) {
	n := len(k.errs)
	g := Gate{Name: gs.Name.Value, Why: gs.Why, Pos: gs.Pos, Approve: ApproveHuman, Timeout: Duration(DefaultGateTimeout)}
	switch {
	case gs.Name.Value == "":
		k.errorf(gs.Pos, "gates: missing required key \"name\"")
	case !gateName().MatchString(gs.Name.Value):
		k.errorf(gs.Name.Pos, "gates.name: %q is not a valid gate name (want [a-z][a-z0-9_-]{0,31})", gs.Name.Value)
	default:
		if p, dup := seen[gs.Name.Value]; dup {
			k.errorf(gs.Name.Pos, "gates: %q is declared twice (first at %s)", gs.Name.Value, k.where(p))
		}
		seen[gs.Name.Value] = gs.Name.Pos
	}
	if strings.TrimSpace(gs.Why) == "" {
		k.errorf(gs.Pos, "gates.why: gate %q needs a why (reviewers read it)", gs.Name.Value)
	}
	if len(gs.Run) == 0 || gs.Run[0].Value == "" {
		k.errorf(gs.Pos, "gates.run: gate %q needs a non-empty argv", gs.Name.Value)
	} else {
		k.gateProgram(gs)
	}
	for _, a := range gs.Run {
		// Probe with a plausible run id: unknown fields and functions fail here.
		if _, err := expandGateArg(a.Value, "20261129T201530Z-3fa9c1"); err != nil {
			k.errorf(a.Pos, "gates.run: %q: %v", a.Value, templateMsg(err))
		}
		g.Run = append(g.Run, a.Value)
	}
	switch gs.Approve.Value {
	case "", ApproveHuman:
	case ApproveDeny:
		g.Approve = ApproveDeny
	default:
		k.errorf(gs.Approve.Pos, "gates.approve: want human or deny, got %q", gs.Approve.Value)
	}
	if gs.Timeout > 0 {
		g.Timeout = Duration(gs.Timeout)
	}
	if name := gs.Credential.Value; name != "" {
		cr, ok := creds[name]
		switch {
		case !ok:
			k.errorf(gs.Credential.Pos, "gates.credential: no credentials entry is named %q", name)
		case cr.Deliver != DeliverGate:
			k.errorf(gs.Credential.Pos, "gates.credential: %s has deliver: %s; a gate's credential needs deliver: gate (it must never reach the sandbox)", name, deliverName(cr.Deliver))
		default:
			c := cr
			g.Credential = &c
		}
	}
	return g, len(k.errs) == n
}

// workspaceRunners are programs that run what they find in their working directory
// (a gate runs in the workspace): a gate naming one runs files the sandbox could write.
var workspaceRunners = map[string]string{
	"make": "the Makefile", "gmake": "the Makefile", "npm": "package.json scripts", "yarn": "package.json scripts",
	"pnpm": "package.json scripts", "npx": "package.json and node_modules", "node": "scripts", "python": "scripts",
	"python3": "scripts", "sh": "scripts", "bash": "scripts", "go": "go:generate lines and the module's code",
	"cargo": "build.rs and the crate's code", "gradle": "the build files", "mvn": "the pom",
	"rake": "the Rakefile", "bundle": "the Gemfile", "just": "the justfile", "task": "the Taskfile", "docker": "the Dockerfile",
	"goreleaser": "the .goreleaser.yaml", "twine": "the built distribution", "terraform": "the configuration",
}

// wrappers are programs whose job is to run another one: a gate naming one would run
// git (or anything) past the checks on the program's name.
var wrappers = map[string]bool{
	"env": true, "nice": true, "nohup": true, "timeout": true, "xargs": true, "stdbuf": true, "sudo": true, "doas": true,
	"chroot": true, "setsid": true, "taskset": true, "ionice": true, "time": true, "command": true, "exec": true,
	"busybox": true, "flock": true, "unshare": true, "nsenter": true, "chrt": true, "runuser": true, "su": true, "watch": true,
	"strace": true, "ltrace": true, "gdb": true, "script": true, "expect": true, "parallel": true, "find": true,
}

// gitWord finds git named as a program in an argument: alone, as a path, or as a
// command in a shell line.
var gitWord = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(^|[\s/;&|(` + "`" + `])git(-[a-z-]+)?(\s|$)`) })

// mentionsGit reports whether any of args names git as a program.
func mentionsGit(args []Str) bool {
	for _, a := range args {
		if gitWord().MatchString(a.Value) {
			return true
		}
	}
	return false
}

// gateProgram refuses a gate program named by a relative path (the workspace's, so the
// sandbox's to write) and notes programs that run what the workspace holds.
func (k *compiler) gateProgram(gs GateSpec) {
	prog := gs.Run[0].Value
	if strings.Contains(prog, "/") && !strings.HasPrefix(prog, "/") {
		k.errorf(gs.Run[0].Pos, "gates.run: %q is a relative path: it would run a file of the workspace, which the sandbox can write, on the host with the gate's credential; name a host program", prog)
		return
	}
	base := prog[strings.LastIndex(prog, "/")+1:]
	if wrappers[base] {
		k.errorf(gs.Run[0].Pos, "gates.run: %s runs another program, which the gate's checks would not see (a git gate must be `git push …` itself); name the program", base)
		return
	}
	if base != "git" && mentionsGit(gs.Run[1:]) {
		k.errorf(gs.Run[0].Pos, "gates.run: %s is given git to run, which the gate's checks would not see (a git gate must be `git push …` itself)", base)
		return
	}
	if strings.HasPrefix(base, "git-") || base == "scalar" || base == "git" && (len(gs.Run) < 2 || gs.Run[1].Value != "push") {
		k.errorf(gs.Run[0].Pos, "gates.run: a git gate must be `git push …`: any other git operation would run in the workspace's repository, whose configuration, hooks and submodules the sandbox may have written")
		return
	}
	if what, ok := workspaceRunners[base]; ok {
		k.plan.Notes = append(k.plan.Notes, fmt.Sprintf("gate %s (%s) runs %s on the host, which reads %s in the workspace: "+
			"whatever the sandbox wrote there runs with the gate's credential; prefer a git push gate and CI on the pushed branch",
			gs.Name.Value, k.where(gs.Run[0].Pos), base, what))
	}
}

func deliverName(d Deliver) string {
	if d == "" {
		return "env (the default)"
	}
	return string(d)
}

// templateMsg drops text/template's "template: run:1:2: " prefix, which names nothing
// the user wrote.
func templateMsg(err error) string {
	msg := err.Error()
	if m := unknownField().FindStringSubmatch(msg); m != nil {
		return "unknown field ." + m[1] + " (the only field is {{.Run}}, the run id)"
	}
	if rest, ok := strings.CutPrefix(msg, "template: run:"); ok {
		if i := strings.Index(rest, ": "); i >= 0 {
			return rest[i+2:]
		}
	}
	return msg
}

// GateCredentials returns the credentials only gates use (deliver: gate), one per
// name, for building their providers (e.g. providers.Needed(append(p.Credentials,
// p.GateCredentials()...))).
func (p *Plan) GateCredentials() []Credential {
	var out []Credential
	seen := map[string]bool{}
	for _, g := range p.Gates {
		if g.Credential != nil && !seen[g.Credential.Name] {
			seen[g.Credential.Name] = true
			out = append(out, *g.Credential)
		}
	}
	return out
}

// Gate returns the plan's gate called name.
func (p *Plan) Gate(name string) (Gate, bool) {
	for _, g := range p.Gates {
		if g.Name == name {
			return g, true
		}
	}
	return Gate{}, false
}
