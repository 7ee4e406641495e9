package contract

import (
	"fmt"
	"slices"
	"strings"
)

// ChangeKind says which part of a contract a [Change] is about.
type ChangeKind int

// Change kinds, in the order [Compare] reports them.
const (
	KindFilesystem ChangeKind = iota // what the sandbox sees at a path (the mount table)
	KindDeny                         // a filesystem.deny_write or deny_read entry
	KindWiden                        // a filesystem.widen entry
	KindGit                          // the workspace's .git (filesystem.git, its protection)
	KindNetwork                      // a network.allow rule
	KindCredential                   // a credentials entry
	KindGate                         // a gates entry
	KindMonitor                      // the monitor section
	KindLimits                       // limits
	KindTimeout                      // commands.timeout
	KindCommands                     // commands.deny
	KindEnv                          // env.pass and env.set
	KindImage                        // image and pull
)

var kindNames = [...]string{"filesystem", "deny", "widen", "git", "network", "credential", "gate",
	"monitor", "limits", "timeout", "commands", "env", "image"}

func (k ChangeKind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("ChangeKind(%d)", int(k))
}

// MarshalText implements encoding.TextMarshaler.
func (k ChangeKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// Change is one way a contract differs from another in what it lets the sandbox do.
type Change struct {
	Kind ChangeKind
	// What says what changed, in one sentence for the reviewer.
	What string
	// Old and New locate the rule in each contract: FILE:LINE:COL, FILE alone when the
	// rule is there by default or has no recorded position, "" when it is absent.
	Old, New string
	// Wider is true when the new contract allows more than the old one. A change whose
	// direction cannot be told (a gate's argv, an image, a scope of another shape)
	// counts as wider: it needs the same review.
	Wider bool
}

// Compiled is a contract and the Plan [Compile] made of it. [Compare] reads the Plan for
// what the sandbox gets, and the Contract for where each rule is written and for the
// rules whose effect depends on more than the host as it is now (deny globs, env.pass).
type Compiled struct {
	Contract *Contract
	Plan     *Plan
}

// Compare reports every way after differs from before in what it lets the sandbox do:
// each widening (Change.Wider) and each narrowing. Both must be compiled against the
// same host and workspace: paths are compared as the compiled mount tables show them.
// Changes come grouped by kind, widenings first within each group; nil means the two
// contracts allow the same.
func Compare(before, after Compiled) []Change {
	c := &comparison{old: before, new: after}
	for _, f := range classified {
		if f.compare != nil {
			f.compare(c)
		}
	}
	slices.SortStableFunc(c.changes, func(a, b Change) int {
		if a.Kind != b.Kind {
			return int(a.Kind) - int(b.Kind)
		}
		if a.Wider != b.Wider {
			if a.Wider {
				return -1
			}
			return 1
		}
		return 0
	})
	return c.changes
}

// String is the change as `cordon diff` prints it: "wider: KIND: WHAT [old: AT, new:
// AT]" (or "narrower: …"), "absent" for a side the rule is not in.
func (c Change) String() string {
	at := func(s string) string {
		if s == "" {
			return "absent"
		}
		return s
	}
	dir := "narrower"
	if c.Wider {
		dir = "wider"
	}
	return fmt.Sprintf("%s: %s: %s [old: %s, new: %s]", dir, c.Kind, c.What, at(c.Old), at(c.New))
}

// WiderFirst orders changes with every widening before every narrowing, keeping the
// order within each.
func WiderFirst(changes []Change) {
	slices.SortStableFunc(changes, func(a, b Change) int {
		if a.Wider == b.Wider {
			return 0
		}
		if a.Wider {
			return -1
		}
		return 1
	})
}

// Wider reports whether any of changes is a widening.
func Wider(changes []Change) bool {
	return slices.ContainsFunc(changes, func(c Change) bool { return c.Wider })
}

// comparison is the state of one Compare call.
type comparison struct {
	old, new Compiled
	changes  []Change
}

func (c *comparison) add(kind ChangeKind, wider bool, oldAt, newAt, format string, args ...any) {
	c.changes = append(c.changes, Change{Kind: kind, What: fmt.Sprintf(format, args...), Old: oldAt, New: newAt, Wider: wider})
}

// order adds a change for a value that went from a to b when they differ, wider when
// b > a. what names the value; show formats one.
func order[T int | int64 | float64](c *comparison, kind ChangeKind, a, b T, oldAt, newAt, what string, show func(T) string) {
	if a != b {
		c.add(kind, b > a, oldAt, newAt, "%s: %s (was %s)", what, show(b), show(a))
	}
}

// at locates p in the side's contract file; "" for the zero Pos (absent from the file).
func (s Compiled) at(p Pos) string {
	if p.Line == 0 {
		return ""
	}
	return Where(s.file(), p)
}

// present locates a rule that is in force but may have no position of its own (a
// default): FILE:LINE:COL when p is set, else FILE.
func (s Compiled) present(p Pos) string { return Where(s.file(), p) }

func (s Compiled) file() string {
	if s.Contract == nil {
		return ""
	}
	return s.Contract.File
}

// fieldRule classifies one field of Plan, of Contract or of a type they hold. compare, when
// set, reports its changes; otherwise how says where it is compared or why it cannot
// widen anything.
type fieldRule struct {
	name    string // Type.Field
	how     string
	compare func(*comparison)
}

// classified lists every field of Plan and Contract and of the types they hold, and what
// cordon diff makes of it. A test fails when a field is missing, so a new contract field
// cannot go unnoticed by the diff: add it here, with a comparison when it can widen.
// The compare functions run in this order.
var classified = []fieldRule{
	{"Plan.Mounts", "each path's access, by containment: hidden < private tmpfs < read-only < writable; higher is wider", compareMounts},
	{"Plan.Widenings", "a new path, or higher access, is wider", compareWidenings},
	{"Plan.Egress", "a host, address or port no old rule covers is wider (*.a.com covers b.a.com and *.b.a.com; 10.0.0.0/8 covers 10.1.0.0/16)", compareEgress},
	{"Plan.Credentials", "with the gates' credentials, by name: new, delivered closer to the sandbox (gate < proxy < env, file), a longer ttl, another provider, a wider scope or more hosts is wider", compareCredentials},
	{"Plan.Gates", "by name: new, another argv, approve deny -> human, a new or other credential, a longer timeout is wider", compareGates},
	{"Plan.Monitor", "mode required > best-effort > off and on_violation kill > alert: lower is wider; new exec entries are wider while the monitor is on", compareMonitor},
	{"Plan.Limits", "a higher or removed (unlimited) memory, pids or cpu limit is wider; so is a higher limits.diff bound (more of cordon's own time, memory and disk spent on the host)", compareLimits},
	{"Plan.Timeout", "longer is wider", compareTimeout},
	{"Plan.Deny", "a removed commands.deny pattern is wider", compareCommandDeny},
	{"Plan.Image", "another image is wider (unordered)", compareImage},
	{"Plan.Pull", "never -> missing is wider", comparePull},
	{"Contract.Env", "a new env.pass name, or a new or changed env.set variable, is wider (compared as written: what the caller has set varies)", compareEnv},
	{"Contract.Filesystem", "Git and DenyWrite/DenyRead compared as written (globs match what exists at compile time); the rest through Plan.Mounts", compareFilesystemRules},

	{"Plan.Version", "the Plan format, the same for both", nil},
	{"Plan.Name", "a label", nil},
	{"Plan.ContractFile", "where the contract was read; its own protection is left out of the comparison", nil},
	{"Plan.ContractDigest", "differs whenever the file does", nil},
	{"Plan.Workspace", "through Plan.Mounts (both are compiled against one workspace)", nil},
	{"Plan.Workdir", "the caller's directory, the same for both", nil},
	{"Plan.Home", "the caller's home, the same for both", nil},
	{"Plan.Links", "mirror the host's top-level links (/bin -> usr/bin); they grant nothing", nil},
	{"Plan.Git", "through Contract.Filesystem (read-only -> commit is wider)", nil},
	{"Plan.Env", "through Contract.Env", nil},
	{"Plan.Notes", "what the compiler left out, informational", nil},

	{"Mount.Path", "Plan.Mounts", nil},
	{"Mount.Type", "Plan.Mounts: a mask hides, a tmpfs is private, a bind shows the host", nil},
	{"Mount.Access", "Plan.Mounts", nil},
	{"Mount.Dir", "how the path is mounted, not what may be done", nil},
	{"Mount.Create", "a placeholder keeps a denied path from being created, not compared", nil},
	{"Mount.Content", "what a placeholder holds, not compared", nil},
	{"Mount.Why", "locates the rule behind a mount", nil},
	{"Link.Path", "Plan.Links", nil},
	{"Link.Target", "Plan.Links", nil},
	{"PlanEnv.Name", "Contract.Env", nil},
	{"PlanEnv.Value", "Contract.Env", nil},
	{"PlanEnv.Source", "Contract.Env", nil},
	{"NetRule.Host", "Plan.Egress", nil},
	{"NetRule.CIDR", "Plan.Egress", nil},
	{"NetRule.Ports", "Plan.Egress", nil},
	{"NetRule.Why", "a justification", nil},
	{"NetRule.Pos", "locates the rule", nil},
	{"EgressRule.Rule", "Plan.Egress: host, cidr and ports as the proxy enforces them", nil},
	{"EgressRule.Pos", "locates the rule", nil},
	{"Credential.Name", "matches credentials", nil},
	{"Credential.Provider", "another provider is wider (unordered)", nil},
	{"Credential.TTL", "longer is wider (0: the broker's default)", nil},
	{"Credential.Scope", "fewer scopes, repositories, policies or env names, a lower permission, fewer num_uses is narrower; any other difference is wider", nil},
	{"Credential.Deliver", "gate < proxy < env = file: closer to the sandbox is wider", nil},
	{"Credential.Hosts", "more hosts is wider; none (any host, for a gate credential) is widest", nil},
	{"Credential.Why", "a justification", nil},
	{"Credential.Pos", "locates the credential", nil},
	{"MonitorPlan.Mode", "Plan.Monitor", nil},
	{"MonitorPlan.OnViolation", "Plan.Monitor", nil},
	{"MonitorPlan.Exec", "Plan.Monitor", nil},
	{"DenyPattern.Pattern", "Plan.Deny, words compared", nil},
	{"DenyPattern.Where", "locates the pattern", nil},
	{"DenyPattern.words", "compiled from Pattern", nil},
	{"DenyPattern.rest", "compiled from Pattern", nil},
	{"LimitsPlan.Memory", "Plan.Limits", nil},
	{"LimitsPlan.Pids", "Plan.Limits", nil},
	{"LimitsPlan.CPU", "Plan.Limits", nil},
	{"LimitsPlan.Tmpfs", "Plan.Limits: follows the memory limit", nil},
	{"LimitsPlan.Defaulted", "Plan.Limits: which limits are cordon's defaults; the values are compared", nil},
	{"LimitsPlan.Diff", "Plan.Limits", nil},
	{"DiffLimitsPlan.Entries", "Plan.Limits", nil},
	{"DiffLimitsPlan.HashFile", "Plan.Limits", nil},
	{"DiffLimitsPlan.HashTotal", "Plan.Limits", nil},
	{"DiffLimitsPlan.Patch", "Plan.Limits", nil},
	{"DiffLimitsPlan.PatchRun", "Plan.Limits", nil},
	{"DiffLimitsPlan.Time", "Plan.Limits", nil},
	{"WideningPlan.Path", "Plan.Widenings", nil},
	{"WideningPlan.Access", "Plan.Widenings", nil},
	{"WideningPlan.Why", "a justification", nil},
	{"WideningPlan.Where", "locates the entry", nil},
	{"Gate.Name", "matches gates", nil},
	{"Gate.Run", "Plan.Gates", nil},
	{"Gate.Approve", "Plan.Gates", nil},
	{"Gate.Why", "a justification", nil},
	{"Gate.Timeout", "Plan.Gates", nil},
	{"Gate.Credential", "Plan.Gates (which credential), Plan.Credentials (what it is)", nil},
	{"Gate.Pos", "locates the gate", nil},

	{"Contract.File", "locates the contract", nil},
	{"Contract.Source", "the file's bytes", nil},
	{"Contract.Version", "checked by Compile", nil},
	{"Contract.VersionPos", "locates the version", nil},
	{"Contract.Name", "Plan.Name", nil},
	{"Contract.Workspace", "Plan.Workspace", nil},
	{"Contract.Image", "Plan.Image", nil},
	{"Contract.Pull", "Plan.Pull", nil},
	{"Contract.Network", "Plan.Egress", nil},
	{"Contract.Credentials", "Plan.Credentials and Plan.Gates", nil},
	{"Contract.Monitor", "Plan.Monitor (positions from here)", nil},
	{"Contract.Commands", "Plan.Timeout and Plan.Deny", nil},
	{"Contract.Limits", "Plan.Limits (positions from here)", nil},
	{"Contract.Gates", "Plan.Gates", nil},
	{"Filesystem.Writable", "Plan.Mounts", nil},
	{"Filesystem.Readable", "Plan.Mounts", nil},
	{"Filesystem.DenyWrite", "Contract.Filesystem: a removed entry is wider unless what it named is read-only or hidden anyway", nil},
	{"Filesystem.DenyRead", "Contract.Filesystem: a removed entry is wider unless what it named is hidden anyway", nil},
	{"Filesystem.Git", "Contract.Filesystem: read-only -> commit is wider", nil},
	{"Filesystem.Widen", "Plan.Widenings", nil},
	{"Filesystem.set", "which lists were written; defaults are in the Plan", nil},
	{"Widening.Path", "Plan.Widenings", nil},
	{"Widening.Access", "Plan.Widenings", nil},
	{"Widening.Why", "a justification", nil},
	{"Widening.Pos", "locates the entry", nil},
	{"Network.Allow", "Plan.Egress", nil},
	{"Env.Pass", "Contract.Env", nil},
	{"Env.Set", "Contract.Env", nil},
	{"EnvVar.Name", "Contract.Env", nil},
	{"EnvVar.Value", "Contract.Env", nil},
	{"EnvVar.Pos", "locates the variable", nil},
	{"Monitor.Mode", "Plan.Monitor", nil},
	{"Monitor.OnViolation", "Plan.Monitor", nil},
	{"Monitor.Exec", "Plan.Monitor", nil},
	{"Commands.Timeout", "Plan.Timeout", nil},
	{"Commands.TimeoutPos", "locates the timeout", nil},
	{"Commands.Deny", "Plan.Deny", nil},
	{"Limits.Memory", "Plan.Limits", nil},
	{"Limits.Pids", "Plan.Limits", nil},
	{"Limits.CPU", "Plan.Limits", nil},
	{"Limits.Diff", "Plan.Limits", nil},
	{"DiffLimits.Entries", "Plan.Limits", nil},
	{"DiffLimits.HashFile", "Plan.Limits", nil},
	{"DiffLimits.HashTotal", "Plan.Limits", nil},
	{"DiffLimits.Patch", "Plan.Limits", nil},
	{"DiffLimits.PatchRun", "Plan.Limits", nil},
	{"DiffLimits.Time", "Plan.Limits", nil},
	{"Limits.Pos", "locates the limits", nil},
	{"GateSpec.Name", "Plan.Gates", nil},
	{"GateSpec.Run", "Plan.Gates", nil},
	{"GateSpec.Credential", "Plan.Gates", nil},
	{"GateSpec.Approve", "Plan.Gates", nil},
	{"GateSpec.Why", "a justification", nil},
	{"GateSpec.Timeout", "Plan.Gates", nil},
	{"GateSpec.Pos", "locates the gate", nil},
}

// joinList formats a few names for a sentence.
func joinList[T any](xs []T) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprint(x)
	}
	return strings.Join(parts, ", ")
}
