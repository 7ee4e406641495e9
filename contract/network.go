package contract

import (
	"net/netip"
	"strings"

	"github.com/cordonhq/cordon/egress/policy"
)

// EgressRule is one compiled network.allow rule: the rule as the egress proxy holds it
// (normalised by the proxy's own policy package, ports defaulted) and where it was written.
type EgressRule struct {
	policy.Rule
	Pos Pos `json:"pos"`
}

// EgressRules returns the plan's allowlist in the proxy's form, in contract order.
func (p *Plan) EgressRules() []policy.Rule {
	out := make([]policy.Rule, len(p.Egress))
	for i, r := range p.Egress {
		out[i] = r.Rule
	}
	return out
}

// network compiles the allowlist once. Each rule names exactly one of host or cidr; the
// egress policy's normaliser is the judge of what a host rule means, so the plan holds
// exactly the rules the proxy will enforce.
func (k *compiler) network() {
	for _, r := range k.c.Network.Allow {
		pr := policy.Rule{Host: r.Host, Ports: r.Ports, Why: r.Why}
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
			pr.CIDR = pfx.Masked()
		case strings.ContainsAny(r.Host, "/@:# \t") || strings.Trim(r.Host, ".") == "":
			k.errorf(r.Pos, "network.allow: bad host %q (want a name like example.com or *.example.com)", r.Host)
			continue
		}
		norm, err := pr.Normalized()
		if err != nil {
			k.errorf(r.Pos, "network.allow: %v", err)
			continue
		}
		k.plan.Egress = append(k.plan.Egress, EgressRule{Rule: norm, Pos: r.Pos})
	}
}
