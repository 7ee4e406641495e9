package contract

import (
	"regexp"
	"sync"
)

var envName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })

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
	case !envName().MatchString(name):
		k.errorf(p, "%s: %q is not a valid variable name", field, name)
	case reservedEnv[name]:
		k.errorf(p, "%s: %s is set by cordon and cannot be changed by a contract", field, name)
	default:
		return true
	}
	return false
}
