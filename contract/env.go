package contract

import (
	"net/netip"
	"regexp"
	"strings"

	"github.com/cordonhq/cordon/egress/policy"
)

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// reservedEnv are variables cordon sets itself inside the sandbox.
var reservedEnv = map[string]bool{
	"HTTP_PROXY": true, "HTTPS_PROXY": true, "ALL_PROXY": true, "NO_PROXY": true,
	"http_proxy": true, "https_proxy": true, "all_proxy": true, "no_proxy": true,
	"HOME": true,
}

// env builds the sandbox environment from nothing: defaults, then env.pass (copied from
// the caller when set), then env.set. Names or values that look like credentials are
// refused: those belong under credentials, where they are issued and revoked.
func (k *compiler) env() {
	get := k.h.Getenv
	if get == nil {
		get = func(string) (string, bool) { return "", false }
	}
	vars := []PlanEnv{
		{Name: "PATH", Value: DefaultPath, Source: EnvDefault},
		{Name: "HOME", Value: k.plan.Home, Source: EnvDefault},
	}
	for _, n := range []string{"LANG", "TERM"} {
		if v, ok := get(n); ok {
			vars = append(vars, PlanEnv{Name: n, Value: v, Source: EnvDefault})
		}
	}
	set := func(e PlanEnv) {
		for i := range vars {
			if vars[i].Name == e.Name {
				vars[i] = e
				return
			}
		}
		vars = append(vars, e)
	}
	for _, p := range k.c.Env.Pass {
		if !k.envNameOK(p.Value, p.Pos, "env.pass") {
			continue
		}
		if credentialLikeName(p.Value) {
			k.errorf(p.Pos, "env.pass: %s looks like a credential; the caller's credentials never enter the sandbox (declare a task-scoped one under credentials)", p.Value)
			continue
		}
		if v, ok := get(p.Value); ok {
			if credentialLikeValue(v) {
				k.errorf(p.Pos, "env.pass: the caller's %s holds what looks like a credential; refusing to pass it", p.Value)
				continue
			}
			set(PlanEnv{Name: p.Value, Value: v, Source: EnvPass})
		}
	}
	for _, e := range k.c.Env.Set {
		if !k.envNameOK(e.Name, e.Pos, "env.set") {
			continue
		}
		if credentialLikeValue(e.Value) {
			k.errorf(e.Pos, "env.set: the value of %s looks like a credential; never write secrets in a contract", e.Name)
			continue
		}
		set(PlanEnv{Name: e.Name, Value: e.Value, Source: EnvSet})
	}
	k.plan.Env = vars
}

func (k *compiler) envNameOK(name string, p Pos, field string) bool {
	switch {
	case !envName.MatchString(name):
		k.errorf(p, "%s: %q is not a valid variable name", field, name)
	case reservedEnv[name]:
		k.errorf(p, "%s: %s is set by cordon and cannot be changed by a contract", field, name)
	default:
		return true
	}
	return false
}

// network checks the allowlist's shape. The egress package normalises and matches
// hosts; here each rule must name exactly one of host or cidr.
func (k *compiler) network() {
	for _, r := range k.c.Network.Allow {
		switch {
		case r.Host == "" && r.CIDR == "":
			k.errorf(r.Pos, "network.allow: a rule needs host or cidr")
			continue
		case r.Host != "" && r.CIDR != "":
			k.errorf(r.Pos, "network.allow: a rule has host or cidr, not both")
			continue
		case r.CIDR != "":
			pfx, err := netip.ParsePrefix(r.CIDR)
			if err != nil {
				k.errorf(r.Pos, "network.allow: bad cidr %q: %v", r.CIDR, err)
				continue
			}
			r.CIDR = pfx.Masked().String()
		case strings.ContainsAny(r.Host, "/@:# \t") || strings.Trim(r.Host, ".") == "":
			k.errorf(r.Pos, "network.allow: bad host %q (want a name like example.com or *.example.com)", r.Host)
			continue
		}
		if len(r.Ports) == 0 {
			r.Ports = []uint16{80, 443}
		}
		// The proxy's own normaliser is the judge of what a host rule means.
		if _, err := policy.New([]policy.Rule{NetPolicyRule(r)}); err != nil {
			k.errorf(r.Pos, "network.allow: %v", err)
			continue
		}
		k.plan.Egress = append(k.plan.Egress, r)
	}
}

// NetPolicyRule converts a compiled allowlist rule to the egress policy's form.
func NetPolicyRule(r NetRule) policy.Rule {
	pr := policy.Rule{Host: r.Host, Ports: r.Ports, Why: r.Why}
	if r.CIDR != "" {
		pr.CIDR, _ = netip.ParsePrefix(r.CIDR)
	}
	return pr
}
