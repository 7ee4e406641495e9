package contract

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// scopeSets are the scope lists (of any provider) whose entries each grant something
// and whose order means nothing: fewer entries are narrower.
var scopeSets = map[string]bool{"scopes": true, "repositories": true, "policies": true, "env": true}

// scopeLevels orders the levels of a github-app scope.permissions entry.
var scopeLevels = map[string]int{"read": 1, "write": 2, "admin": 3}

// scopeChange compares two credential scopes: changed when they differ, wider unless
// n grants no more than o.
func scopeChange(o, n map[string]any) (wider, changed bool) {
	if reflect.DeepEqual(o, n) {
		return false, false
	}
	return !scopeWithin(n, o), true
}

// scopeWithin reports whether scope n grants no more than o. Scopes are
// provider-specific, so only what is known to narrow counts: the same keys, each value
// equal, except that a list of scopeSets may lose entries, permissions may lose
// entries or levels, and num_uses may go down (0 is unlimited). A key added or removed
// (a provider default stepping in) is not known to narrow.
func scopeWithin(n, o map[string]any) bool {
	if len(n) != len(o) {
		return false
	}
	for k, nv := range n {
		ov, ok := o[k]
		if !ok {
			return false
		}
		var within bool
		switch {
		case scopeSets[k]:
			within = subset(nv, ov)
		case k == "permissions":
			within = levelsWithin(nv, ov)
		case k == "num_uses":
			nu, ou := toInt(nv), toInt(ov)
			within = nu > 0 && (ou == 0 || nu <= ou)
		default:
			within = reflect.DeepEqual(nv, ov)
		}
		if !within {
			return false
		}
	}
	return true
}

func subset(n, o any) bool {
	nl, ok1 := n.([]any)
	ol, ok2 := o.([]any)
	return ok1 && ok2 && !slices.ContainsFunc(nl, func(x any) bool {
		return !slices.ContainsFunc(ol, func(y any) bool { return reflect.DeepEqual(x, y) })
	})
}

func levelsWithin(n, o any) bool {
	nm, ok1 := n.(map[string]any)
	om, ok2 := o.(map[string]any)
	if !ok1 || !ok2 {
		return false
	}
	for k, v := range nm {
		nl, ol := scopeLevels[fmt.Sprint(v)], scopeLevels[fmt.Sprint(om[k])]
		if nl == 0 || ol == 0 || nl > ol {
			return false
		}
	}
	return true
}

func toInt(v any) int64 {
	i, err := strconv.ParseInt(fmt.Sprint(v), 10, 64)
	if err != nil {
		return -1
	}
	return i
}

// monitorModes ranks monitor.mode by strength: a weaker monitor is wider.
var monitorModes = map[MonitorMode]int{MonitorOff: 0, MonitorBestEffort: 1, MonitorRequired: 2}

// compareMonitor compares the monitor: a weaker mode or a gentler on_violation is wider,
// and so are new exec entries (more programs may run without a deviation) while both
// are on.
func compareMonitor(c *comparison) {
	o, n := c.old.Plan.Monitor, c.new.Plan.Monitor
	oc, nc := c.old.Contract.Monitor, c.new.Contract.Monitor
	if o.Mode != n.Mode {
		c.add(KindMonitor, monitorModes[n.Mode] < monitorModes[o.Mode], c.old.at(oc.Mode.Pos), c.new.at(nc.Mode.Pos),
			"monitor.mode: %s (was %s)", n.Mode, o.Mode)
	}
	if o.OnViolation != n.OnViolation {
		c.add(KindMonitor, n.OnViolation != ViolationKill, c.old.at(oc.OnViolation.Pos), c.new.at(nc.OnViolation.Pos),
			"monitor.on_violation: %s (was %s)", n.OnViolation, o.OnViolation)
	}
	if o.Mode == MonitorOff || n.Mode == MonitorOff {
		return // exec entries mean nothing to a monitor that is off; the mode says it all
	}
	for _, e := range nc.Exec {
		if !slices.Contains(o.Exec, e.Value) {
			c.add(KindMonitor, true, "", c.new.at(e.Pos), "monitor.exec allows %q", e.Value)
		}
	}
	for _, e := range oc.Exec {
		if !slices.Contains(n.Exec, e.Value) {
			c.add(KindMonitor, false, c.old.at(e.Pos), "", "monitor.exec no longer allows %q", e.Value)
		}
	}
}

// compareLimits compares the resource limits, where zero is unlimited.
func compareLimits(c *comparison) {
	o, n := c.old.Plan.Limits, c.new.Plan.Limits
	oldAt, newAt := c.old.at(c.old.Contract.Limits.Pos), c.new.at(c.new.Contract.Limits.Pos)
	for _, l := range []struct {
		name string
		a, b float64
		show func(float64) string
	}{
		{"memory", float64(o.Memory), float64(n.Memory), func(v float64) string { return sizeString(int64(v)) }},
		{"pids", float64(o.Pids), float64(n.Pids), func(v float64) string { return strconv.FormatInt(int64(v), 10) }},
		{"cpu", o.CPU, n.CPU, func(v float64) string {
			if v == 1 {
				return "1 CPU"
			}
			return strconv.FormatFloat(v, 'g', -1, 64) + " CPUs"
		}},
	} {
		show := func(v float64) string {
			if v <= 0 {
				return "unlimited"
			}
			return l.show(v)
		}
		// Unlimited is the most; rank it above any number.
		rank := func(v float64) float64 {
			if v <= 0 {
				return float64(1 << 62)
			}
			return v
		}
		if l.a != l.b {
			c.add(KindLimits, rank(l.b) > rank(l.a), oldAt, newAt, "limits.%s: %s (was %s)", l.name, show(l.b), show(l.a))
		}
	}
	compareDiffLimits(c, o.Diff, n.Diff, oldAt, newAt)
}

// compareDiffLimits compares the bounds of limits.diff (always set): higher is wider.
func compareDiffLimits(c *comparison, o, n DiffLimitsPlan, oldAt, newAt string) {
	for _, l := range []struct {
		name string
		a, b int64
		show func(int64) string
	}{
		{"entries", o.Entries, n.Entries, func(v int64) string { return strconv.FormatInt(v, 10) }},
		{"hash_file", o.HashFile, n.HashFile, sizeString},
		{"hash_total", o.HashTotal, n.HashTotal, sizeString},
		{"patch", o.Patch, n.Patch, sizeString},
		{"patch_run", o.PatchRun, n.PatchRun, sizeString},
		{"time", int64(o.Time), int64(n.Time), func(v int64) string { return time.Duration(v).String() }},
	} {
		if l.a != l.b {
			c.add(KindLimits, l.b > l.a, oldAt, newAt, "limits.diff.%s: %s (was %s)", l.name, l.show(l.b), l.show(l.a))
		}
	}
}

// sizeString formats a byte count as the contract would write it.
func sizeString(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// compareTimeout compares commands.timeout: longer is wider.
func compareTimeout(c *comparison) {
	order(c, KindTimeout, int64(c.old.Plan.Timeout), int64(c.new.Plan.Timeout),
		c.old.at(c.old.Contract.Commands.TimeoutPos), c.new.at(c.new.Contract.Commands.TimeoutPos),
		"commands.timeout", func(d int64) string { return time.Duration(d).String() })
}

// compareCommandDeny compares commands.deny patterns, word for word: a pattern gone is
// wider.
func compareCommandDeny(c *comparison) {
	key := func(d DenyPattern) string { return strings.Join(strings.Fields(d.Pattern), " ") }
	has := func(ds []DenyPattern, k string) bool {
		return slices.ContainsFunc(ds, func(d DenyPattern) bool { return key(d) == k })
	}
	for _, d := range c.old.Plan.Deny {
		if !has(c.new.Plan.Deny, key(d)) {
			c.add(KindCommands, true, d.Where, "", "commands.deny %q is gone: those commands may run", d.Pattern)
		}
	}
	for _, d := range c.new.Plan.Deny {
		if !has(c.old.Plan.Deny, key(d)) {
			c.add(KindCommands, false, "", d.Where, "commands.deny %q is new", d.Pattern)
		}
	}
}

// compareImage compares the container image: another image is a change of what runs,
// which cordon cannot order, so it counts as wider.
func compareImage(c *comparison) {
	o, n := c.old.Plan.Image, c.new.Plan.Image
	if o == n {
		return
	}
	oldAt, newAt := "", ""
	if o != "" {
		oldAt = c.old.present(Pos{})
	}
	if n != "" {
		newAt = c.new.present(Pos{})
	}
	c.add(KindImage, true, oldAt, newAt, "image: %q (was %q)", n, o)
}

// comparePull compares pull: fetching a missing image from a registry is wider than
// never pulling.
func comparePull(c *comparison) {
	if o, n := c.old.Plan.Pull, c.new.Plan.Pull; o != n {
		c.add(KindImage, n == "missing", c.old.at(c.old.Contract.Pull.Pos), c.new.at(c.new.Contract.Pull.Pos), "pull: %s (was %s)", n, o)
	}
}

// compareEnv compares the environment as written: a name passed from the caller, or a
// variable set, that the old contract did not pass or set the same is wider. The
// caller's own variables vary from run to run, so env.pass is compared by name.
func compareEnv(c *comparison) {
	oe, ne := c.old.Contract.Env, c.new.Contract.Env
	hasPass := func(ps []Str, name string) int {
		return slices.IndexFunc(ps, func(p Str) bool { return p.Value == name })
	}
	for _, p := range ne.Pass {
		if hasPass(oe.Pass, p.Value) < 0 {
			c.add(KindEnv, true, "", c.new.at(p.Pos), "env.pass: the caller's %s enters the sandbox", p.Value)
		}
	}
	for _, p := range oe.Pass {
		if hasPass(ne.Pass, p.Value) < 0 {
			c.add(KindEnv, false, c.old.at(p.Pos), "", "env.pass: the caller's %s no longer enters the sandbox", p.Value)
		}
	}
	setOf := func(vs []EnvVar, name string) (EnvVar, bool) {
		i := slices.IndexFunc(vs, func(v EnvVar) bool { return v.Name == name })
		if i < 0 {
			return EnvVar{}, false
		}
		return vs[i], true
	}
	for _, v := range ne.Set {
		switch o, ok := setOf(oe.Set, v.Name); {
		case !ok:
			c.add(KindEnv, true, "", c.new.at(v.Pos), "env.set: %s is set", v.Name)
		case o.Value != v.Value:
			c.add(KindEnv, true, c.old.at(o.Pos), c.new.at(v.Pos), "env.set: %s has another value", v.Name)
		}
	}
	for _, o := range oe.Set {
		if _, ok := setOf(ne.Set, o.Name); !ok {
			c.add(KindEnv, false, c.old.at(o.Pos), "", "env.set: %s is no longer set", o.Name)
		}
	}
}
