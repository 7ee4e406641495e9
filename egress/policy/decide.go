package policy

import (
	"fmt"
	"net/netip"
)

// Decide answers whether args may be reached. Call it first with Host and Port only:
//   - for an IP literal the answer is final ([Allow] or [Deny]);
//   - for a name it is [Deny], or [Resolve] when a host rule matches the name on the port
//     or a cidr rule allows the port (the name might resolve into it).
//
// After [Resolve], look the (normalised) [Decision.Host] up and call Decide once per
// address with [DecideArgs.Addr] set; dial only the addresses that get [Allow]. An address
// is allowed when a cidr rule contains it on the port, or when a host rule matched the
// name on the port and the address is public. A host rule never allows a special address
// (loopback, private, link-local, CGNAT, ...): only a cidr rule naming it does.
//
// A name that no host rule matches still gets [Resolve] when some cidr rule allows the
// port, because it might point into the range. So a contract with cidr rules lets the
// workload make the proxy look up names of its choosing (a DNS side channel); contracts
// that must prevent that should use host rules only.
//
// Decide on a nil Policy denies everything.
func (p *Policy) Decide(args DecideArgs) Decision {
	host, lit, err := normalize(args.Host)
	if err != nil {
		return Decision{Reason: err.Error(), Category: Malformed}
	}
	d := Decision{Host: host}
	if args.Port == 0 {
		d.Reason, d.Category = "port 0 is not a destination port", Malformed
		return d
	}
	if p == nil {
		p = &Policy{}
	}
	if lit.IsValid() {
		if args.Addr.IsValid() && args.Addr != lit {
			d.Reason = fmt.Sprintf("address %s is not the requested address %s", args.Addr, lit)
			return d
		}
		return p.decideAddr(d, lit, args.Port, nil, false)
	}
	hr, hostPortMiss := p.matchHost(host, args.Port)
	if args.Addr.IsValid() {
		return p.decideAddr(d, args.Addr, args.Port, hr, hostPortMiss)
	}
	switch {
	case hr != nil:
		d.Verdict, d.Rule = Resolve, hr.clone()
		d.Reason = fmt.Sprintf("host %q matches rule %s; its addresses are checked next", host, hr.Rule)
	case p.cidrOnPort(args.Port):
		d.Verdict = Resolve
		d.Reason = fmt.Sprintf("no host rule names %q; a cidr rule may allow its addresses", host)
	case hostPortMiss:
		d.Reason, d.Category = fmt.Sprintf("no rule allows host %q on port %d", host, args.Port), PortNotAllowed
	default:
		d.Reason, d.Category = fmt.Sprintf("no rule allows host %q", host), NotAllowed
	}
	return d
}

// decideAddr decides one address a for d.Host on port. hr is the host rule that matched the
// name on port (nil for IP literals or when none did); hostPortMiss says a host rule matched
// the name on another port.
func (p *Policy) decideAddr(d Decision, a netip.Addr, port uint16, hr *rule, hostPortMiss bool) Decision {
	d.Addr = a
	cr, cidrPortMiss := p.matchCIDR(a, port)
	what := classify(a)
	// A normalised name is LDH and never ends in a number, so it cannot equal an address.
	literal := d.Host == a.String()
	switch {
	case cr != nil:
		d.Verdict, d.Rule = Allow, cr.clone()
		d.Reason = fmt.Sprintf("address %s is in rule %s", a, cr.Rule)
	case hr != nil && what == "":
		d.Verdict, d.Rule = Allow, hr.clone()
		d.Reason = fmt.Sprintf("host %q matches rule %s", d.Host, hr.Rule)
	case hr != nil && cidrPortMiss:
		d.Reason, d.Category = fmt.Sprintf("address %s is %s and no cidr rule names it on port %d", a, what, port), ForbiddenAddress
	case cidrPortMiss:
		d.Reason, d.Category = fmt.Sprintf("no rule allows address %s on port %d", a, port), PortNotAllowed
		if !literal && !hostPortMiss {
			d.Category = NotAllowed // the name is in no rule; its address is, on other ports
		}
	case hr != nil:
		d.Reason, d.Category = fmt.Sprintf("address %s is %s and no cidr rule names it", a, what), ForbiddenAddress
	case literal && what != "":
		d.Reason, d.Category = fmt.Sprintf("address %s is %s and no cidr rule names it", a, what), PrivateAddress
	case literal:
		d.Reason, d.Category = fmt.Sprintf("no cidr rule allows address %s", a), NotAllowed
	case hostPortMiss:
		d.Reason, d.Category = fmt.Sprintf("no rule allows host %q on port %d", d.Host, port), PortNotAllowed
	default:
		d.Reason, d.Category = fmt.Sprintf("no rule allows host %q or its address %s", d.Host, a), NotAllowed
	}
	return d
}
