package contract

import (
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/cordonhq/cordon/egress/policy"
)

// egressRule is a network.allow rule as the proxy reads it: host normalised ("*.a.com"
// with suffix ".a.com" for a wildcard), or an address range, and its ports.
type egressRule struct {
	host, suffix string
	cidr         netip.Prefix
	ports        []uint16
	pos          Pos
}

func (r egressRule) String() string {
	if r.host != "" {
		return r.host
	}
	return r.cidr.String()
}

func egressRules(p *Plan) []egressRule {
	out := make([]egressRule, 0, len(p.Egress))
	for _, r := range p.Egress {
		e := egressRule{host: r.Host, cidr: r.CIDR, ports: r.Ports, pos: r.Pos}
		if s, ok := strings.CutPrefix(r.Host, "*"); ok {
			e.suffix = s
		}
		out = append(out, e)
	}
	return out
}

// coversHost reports whether every destination n names is one r names.
func (r egressRule) coversHost(n egressRule) bool {
	switch {
	case r.host != "" && n.host != "":
		if r.suffix == "" {
			return n.suffix == "" && n.host == r.host
		}
		if n.suffix == "" {
			return strings.HasSuffix(n.host, r.suffix)
		}
		return strings.HasSuffix(n.suffix, r.suffix)
	case r.cidr.IsValid() && n.cidr.IsValid():
		return r.cidr.Bits() <= n.cidr.Bits() && r.cidr.Contains(n.cidr.Addr())
	}
	return false // a host rule and an address rule reach different things
}

// compareEgress reports every destination and port a rule of one contract allows that
// no rule of the other does.
func compareEgress(c *comparison) {
	olds, news := egressRules(c.old.Plan), egressRules(c.new.Plan)
	diffEgress(c, olds, news, true)
	diffEgress(c, news, olds, false)
}

// diffEgress reports the ports of each rule of b that no rule of a covers; wider says
// whether a is the old contract's.
func diffEgress(c *comparison, a, b []egressRule, wider bool) {
	from, to := c.old, c.new
	if !wider {
		from, to = to, from
	}
	for _, n := range b {
		var near *egressRule
		var missing []uint16
		for _, port := range n.ports {
			covered := false
			for i := range a {
				if a[i].coversHost(n) {
					near = &a[i]
					covered = covered || slices.Contains(a[i].ports, port)
				}
			}
			if !covered {
				missing = append(missing, port)
			}
		}
		if len(missing) == 0 {
			continue
		}
		verb := "allows"
		if !wider {
			verb = "no longer allows"
		}
		ports := "port "
		if len(missing) > 1 {
			ports = "ports "
		}
		what := "network.allow " + verb + " " + n.String() + " on " + ports + joinList(missing)
		otherAt := ""
		if near != nil {
			otherAt = from.at(near.pos)
		}
		if wider {
			c.add(KindNetwork, true, otherAt, to.at(n.pos), "%s", what)
		} else {
			c.add(KindNetwork, false, to.at(n.pos), otherAt, "%s", what)
		}
	}
}

// credentialDefaultTTL is the broker's ttl for a credential that sets none
// (creds.DefaultTTL; a test keeps them equal).
const credentialDefaultTTL = time.Hour

// credentialsOf returns every credential a plan declares, the gates' (deliver: gate)
// included, by name.
func credentialsOf(p *Plan) map[string]Credential {
	out := map[string]Credential{}
	for _, cr := range append(slices.Clone(p.Credentials), p.GateCredentials()...) {
		out[cr.Name] = cr
	}
	return out
}

// deliverRank orders deliveries by how close the value comes to the sandbox: a gate's
// credential never enters it, a proxy one is only a placeholder there, env and file
// hand it the value.
func deliverRank(d Deliver) int {
	switch d {
	case DeliverGate:
		return 0
	case DeliverProxy:
		return 1
	}
	return 2
}

// compareCredentials compares credentials by name.
func compareCredentials(c *comparison) {
	olds, news := credentialsOf(c.old.Plan), credentialsOf(c.new.Plan)
	for _, name := range sortedKeys(news) {
		n := news[name]
		o, ok := olds[name]
		newAt := c.new.at(n.Pos)
		if !ok {
			c.add(KindCredential, true, "", newAt, "credential %s is new (%s, deliver: %s)", name, n.Provider, deliverName(n.Deliver))
			continue
		}
		oldAt := c.old.at(o.Pos)
		if ro, rn := deliverRank(o.Deliver), deliverRank(n.Deliver); ro != rn {
			c.add(KindCredential, rn > ro, oldAt, newAt, "credential %s: deliver: %s (was %s)", name, deliverName(n.Deliver), deliverName(o.Deliver))
		}
		if o.Provider != n.Provider {
			c.add(KindCredential, true, oldAt, newAt, "credential %s: provider %s (was %s)", name, n.Provider, o.Provider)
		}
		order(c, KindCredential, int64(ttlOf(o)), int64(ttlOf(n)), oldAt, newAt, "credential "+name+": ttl",
			func(d int64) string { return time.Duration(d).String() })
		if w, changed := scopeChange(o.Scope, n.Scope); changed {
			what := "narrower"
			if w {
				what = "wider, or changed in a way cordon cannot order"
			}
			c.add(KindCredential, w, oldAt, newAt, "credential %s: scope is %s", name, what)
		}
		if deliverRank(o.Deliver) == deliverRank(n.Deliver) {
			compareHosts(c, name, o, n, oldAt, newAt)
		}
	}
	for _, name := range sortedKeys(olds) {
		if _, ok := news[name]; !ok {
			c.add(KindCredential, false, c.old.at(olds[name].Pos), "", "credential %s is gone", name)
		}
	}
}

func ttlOf(cr Credential) time.Duration {
	if cr.TTL <= 0 {
		return credentialDefaultTTL
	}
	return cr.TTL
}

// compareHosts compares where a credential may go: no hosts means any host (a gate's
// helper answers for every host).
func compareHosts(c *comparison, name string, o, n Credential, oldAt, newAt string) {
	norm := func(hs []string) []string {
		out := make([]string, 0, len(hs))
		for _, h := range hs {
			if v, err := policy.Normalize(h); err == nil {
				h = v
			}
			out = append(out, h)
		}
		return out
	}
	oh, nh := norm(o.Hosts), norm(n.Hosts)
	added := slices.DeleteFunc(slices.Clone(nh), func(h string) bool { return slices.Contains(oh, h) })
	removed := slices.DeleteFunc(slices.Clone(oh), func(h string) bool { return slices.Contains(nh, h) })
	switch {
	case len(oh) > 0 && len(nh) == 0:
		c.add(KindCredential, true, oldAt, newAt, "credential %s: hosts are gone: it goes to any host", name)
	case len(oh) == 0 && len(nh) > 0:
		c.add(KindCredential, false, oldAt, newAt, "credential %s: goes only to %s (was any host)", name, joinList(nh))
	case len(oh) > 0 && len(added) > 0:
		c.add(KindCredential, true, oldAt, newAt, "credential %s: also goes to %s", name, joinList(added))
	case len(removed) > 0:
		c.add(KindCredential, false, oldAt, newAt, "credential %s: no longer goes to %s", name, joinList(removed))
	}
}

// compareGates compares gates by name. What their credentials are is compared with the
// other credentials.
func compareGates(c *comparison) {
	for _, n := range c.new.Plan.Gates {
		newAt := c.new.at(n.Pos)
		o, ok := c.old.Plan.Gate(n.Name)
		if !ok {
			c.add(KindGate, true, "", newAt, "gate %s is new: runs %q on the host (approve: %s)", n.Name, n.Run, n.Approve)
			continue
		}
		oldAt := c.old.at(o.Pos)
		if !slices.Equal(o.Run, n.Run) {
			c.add(KindGate, true, oldAt, newAt, "gate %s: runs %q (was %q)", n.Name, n.Run, o.Run)
		}
		if o.Approve != n.Approve {
			c.add(KindGate, n.Approve != ApproveDeny, oldAt, newAt, "gate %s: approve: %s (was %s)", n.Name, n.Approve, o.Approve)
		}
		oc, nc := gateCredential(o), gateCredential(n)
		switch {
		case oc == nc:
		case nc == "":
			c.add(KindGate, false, oldAt, newAt, "gate %s: no longer gets credential %s", n.Name, oc)
		case oc == "":
			c.add(KindGate, true, oldAt, newAt, "gate %s: gets credential %s", n.Name, nc)
		default:
			c.add(KindGate, true, oldAt, newAt, "gate %s: gets credential %s (was %s)", n.Name, nc, oc)
		}
		order(c, KindGate, int64(o.Timeout), int64(n.Timeout), oldAt, newAt, "gate "+n.Name+": timeout",
			func(d int64) string { return time.Duration(d).String() })
	}
	for _, o := range c.old.Plan.Gates {
		if _, ok := c.new.Plan.Gate(o.Name); !ok {
			c.add(KindGate, false, c.old.at(o.Pos), "", "gate %s is gone", o.Name)
		}
	}
}

func gateCredential(g Gate) string {
	if g.Credential == nil {
		return ""
	}
	return g.Credential.Name
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
