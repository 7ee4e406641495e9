package policy

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Rule allows connections to one host name, or to one address range, on some ports.
// Exactly one of Host and CIDR is set.
type Rule struct {
	// Host is an exact name ("proxy.golang.org") or a wildcard ("*.example.com") that
	// matches every name below the domain at any depth, but not the domain itself: list
	// "example.com" separately to allow it. IP literals belong in CIDR.
	Host string `json:"host,omitempty"`
	// CIDR allows destinations by address: an IP literal, or a name (matched by a host rule
	// or not) that resolves into it. It is the only way to reach a special address such as
	// 127.0.0.1 or 10.0.0.5. Host bits must be zero.
	CIDR netip.Prefix `json:"cidr,omitzero"`
	// Ports are the allowed destination ports; empty means 80 and 443.
	Ports []uint16 `json:"ports"`
	// Why is the contract author's justification, carried into logs and events.
	Why string `json:"why,omitempty"`
}

// Normalized checks r alone and returns it in the form a Policy holds it: host
// lower-cased and IDNA-checked ("*.a.com" for a wildcard), ports sorted, unique, and
// defaulted to 80 and 443. The error wraps [ErrInvalidRule].
func (r Rule) Normalized() (Rule, error) {
	cr, err := compile(r)
	if err != nil {
		return Rule{}, err
	}
	return cr.clone(), nil
}

// defaultPorts are the ports of a Rule whose Ports is empty.
var defaultPorts = []uint16{80, 443}

// String returns the rule as "host:ports" or "cidr:ports", e.g. "*.example.com:80,443".
func (r Rule) String() string {
	var b strings.Builder
	if r.Host != "" {
		b.WriteString(r.Host)
	} else {
		b.WriteString(r.CIDR.String())
	}
	ports := r.Ports
	if len(ports) == 0 {
		ports = defaultPorts
	}
	for i, p := range ports {
		if i == 0 {
			b.WriteByte(':')
		} else {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(int(p)))
	}
	return b.String()
}

// Verdict is the outcome of [Policy.Decide]. The zero value is [Deny].
type Verdict int

// Verdicts.
const (
	// Deny refuses the connection. It is the zero value.
	Deny Verdict = iota
	// Allow permits dialling [Decision.Addr] (and only that address) on the requested port.
	Allow
	// Resolve means the name may be allowed: resolve it and call Decide again with each
	// address. It never permits a connection by itself.
	Resolve
)

// String implements fmt.Stringer.
func (v Verdict) String() string {
	switch v {
	case Deny:
		return "deny"
	case Allow:
		return "allow"
	case Resolve:
		return "resolve"
	}
	return "verdict(" + strconv.Itoa(int(v)) + ")"
}

// DecideArgs is the question asked of a [Policy]. Using a struct keeps Decide stable as
// fields are added.
type DecideArgs struct {
	// Host is the destination as the client gave it: a DNS name, an IPv4 literal or an
	// IPv6 literal with or without brackets, without a port. It is normalised first.
	Host string
	// Port is the destination port; 0 is always denied.
	Port uint16
	// Addr is one address Host resolved to, which the caller is about to dial. Leave it
	// unset on the first, name-only question. For an IP literal Host it may be unset or
	// must equal the literal.
	Addr netip.Addr
}

// Decision is the answer of [Policy.Decide].
type Decision struct {
	// Verdict is Deny, Allow or Resolve.
	Verdict Verdict
	// Reason is a short human explanation, safe to show to the workload, e.g.
	// `no rule allows host "x"` or
	// `address 10.0.0.5 is private and no cidr rule names it`.
	Reason string
	// Category is the kind of denial, for a Deny; [Denied] otherwise.
	Category Category
	// Rule is the rule that matched (a copy), zero when none did.
	Rule Rule
	// Host is the normalised host, empty when it was malformed.
	Host string
	// Addr is the address the decision is about: the IP literal, or DecideArgs.Addr.
	Addr netip.Addr
}

// Policy is a compiled, immutable rule set. A nil or empty Policy denies everything.
// It is safe for concurrent use by multiple goroutines.
type Policy struct {
	rules []rule
}

// rule is a validated Rule with its matching data precomputed.
type rule struct {
	Rule
	suffix string // ".example.com" for a wildcard rule, else ""
}

// New validates and normalises rules and returns the Policy they form. Every problem is
// reported, joined, each wrapping [ErrInvalidRule] and naming the rule's index.
func New(rules []Rule) (*Policy, error) {
	p := &Policy{rules: make([]rule, 0, len(rules))}
	var errs []error
	for i, r := range rules {
		cr, err := compile(r)
		if err != nil {
			errs = append(errs, fmt.Errorf("rule %d: %w", i, err))
			continue
		}
		p.rules = append(p.rules, cr)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return p, nil
}

// Rules returns a copy of the normalised rules, in order.
func (p *Policy) Rules() []Rule {
	if p == nil {
		return nil
	}
	out := make([]Rule, len(p.rules))
	for i, r := range p.rules {
		out[i] = r.clone()
	}
	return out
}

func (r rule) clone() Rule {
	c := r.Rule
	c.Ports = slices.Clone(r.Ports)
	return c
}

func (r rule) allowsPort(port uint16) bool {
	return slices.Contains(r.Ports, port)
}

// compile checks one rule and reports all of its problems.
func compile(r Rule) (rule, error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidRule}, args...)...))
	}
	out := rule{Rule: Rule{Why: r.Why}}
	switch {
	case r.Host != "" && r.CIDR.IsValid():
		bad("both host %s and cidr %s are set", quote(r.Host), r.CIDR)
	case r.Host == "" && !r.CIDR.IsValid():
		bad("neither host nor cidr is set")
	case r.Host != "":
		host, suffix, err := compileHost(r.Host)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: %w", ErrInvalidRule, err))
		}
		out.Host, out.suffix = host, suffix
	default:
		if m := r.CIDR.Masked(); m != r.CIDR {
			bad("cidr %s has bits set past its length (did you mean %s?)", r.CIDR, m)
		}
		out.CIDR = r.CIDR
	}
	ports := slices.Clone(r.Ports)
	if len(ports) == 0 {
		ports = slices.Clone(defaultPorts)
	}
	if slices.Contains(ports, 0) {
		bad("port 0 is not a destination port")
	}
	slices.Sort(ports)
	out.Ports = slices.Compact(ports)
	return out, errors.Join(errs...)
}

// compileHost normalises a rule's host and returns it with its wildcard suffix, if any.
func compileHost(h string) (host, suffix string, err error) {
	wild := strings.HasPrefix(h, "*.")
	base := h
	if wild {
		base = h[2:]
	}
	if strings.Contains(base, "*") {
		return "", "", fmt.Errorf("host %s: '*' is only allowed as a whole first label", quote(h))
	}
	norm, addr, err := normalize(base)
	switch {
	case err != nil:
		return "", "", err
	case addr.IsValid():
		return "", "", fmt.Errorf("host %s is an address: use cidr", quote(h))
	case !wild:
		return norm, "", nil
	case !strings.Contains(norm, "."):
		return "", "", fmt.Errorf("host %s: a wildcard must name a domain below the top level", quote(h))
	}
	return "*." + norm, "." + norm, nil
}

// matchHost returns the first host rule that matches name on port, and whether some host
// rule matched name on another port.
func (p *Policy) matchHost(name string, port uint16) (r *rule, portMiss bool) {
	for i := range p.rules {
		r := &p.rules[i]
		if r.Host == "" {
			continue
		}
		if r.Host == name || r.suffix != "" && len(name) > len(r.suffix) && strings.HasSuffix(name, r.suffix) {
			if r.allowsPort(port) {
				return r, false
			}
			portMiss = true
		}
	}
	return nil, portMiss
}

// matchCIDR returns the first cidr rule that contains a on port, and whether some cidr rule
// contains a on another port.
func (p *Policy) matchCIDR(a netip.Addr, port uint16) (r *rule, portMiss bool) {
	for i := range p.rules {
		r := &p.rules[i]
		if !r.CIDR.IsValid() || !r.CIDR.Contains(a) {
			continue
		}
		if r.allowsPort(port) {
			return r, false
		}
		portMiss = true
	}
	return nil, portMiss
}

// cidrOnPort reports whether some cidr rule allows port, so that a name no host rule
// matches might still resolve into an allowed range.
func (p *Policy) cidrOnPort(port uint16) bool {
	for _, r := range p.rules {
		if r.CIDR.IsValid() && r.allowsPort(port) {
			return true
		}
	}
	return false
}
