package policy

import (
	"fmt"
	"net/netip"
)

// Category is the kind of reason a destination was denied, the part of a denial that is
// shown to the workload and in `cordon run`'s summary. Its zero value, [Denied], is the
// generic "denied by contract".
type Category int

// Categories of denial.
const (
	// Denied is any denial without a more specific category.
	Denied Category = iota
	// NotAllowed: no rule names the host (or, for an IP literal, its address).
	NotAllowed
	// PortNotAllowed: a rule names the host or address, but not on this port.
	PortNotAllowed
	// PrivateAddress: the IP literal asked for is a special address (loopback, private,
	// link-local, ...) that no cidr rule names.
	PrivateAddress
	// ForbiddenAddress: the name asked for resolves to a special address that no cidr
	// rule names.
	ForbiddenAddress
	// Malformed: the destination or the request naming it could not be accepted as
	// written (a malformed host, port 0, a Host header that names another host).
	Malformed
	// Unresolvable: the name could not be resolved.
	Unresolvable
	// ServerNameMismatch: a tunnel's TLS ClientHello named another server than the host
	// that was checked, or none for a host name (the client sees a TLS access_denied
	// alert).
	ServerNameMismatch
)

var categoryNames = [...]string{
	Denied:             "denied by contract",
	NotAllowed:         "not in network.allow",
	PortNotAllowed:     "port not allowed",
	PrivateAddress:     "private address",
	ForbiddenAddress:   "resolves to a forbidden address",
	Malformed:          "malformed request",
	Unresolvable:       "cannot resolve",
	ServerNameMismatch: "tls server name does not match the host",
}

// String returns the category as it is shown, e.g. "not in network.allow".
func (c Category) String() string {
	if c < 0 || int(c) >= len(categoryNames) {
		return categoryNames[Denied]
	}
	return categoryNames[c]
}

// SuggestRule returns the contract rule that would allow d's destination on port, in the
// contract's YAML flow syntax, or "" when no rule can (a malformed request, an
// unresolvable name, a generic denial). It names only that destination: the host asked
// for, or for an address category the address the decision is about (the IP literal, or
// the address the name resolved to), never anything else from the contract.
func SuggestRule(d Decision, port uint16) string {
	if port == 0 {
		return ""
	}
	switch d.Category {
	case NotAllowed, PortNotAllowed:
		if d.Host == "" {
			return ""
		}
		if a, err := netip.ParseAddr(d.Host); err == nil {
			if a.Is4In6() || a.Zone() != "" {
				return ""
			}
			return cidrRule(a, port)
		}
		return fmt.Sprintf("network.allow: [{host: %s, ports: [%d]}]", d.Host, port)
	case PrivateAddress, ForbiddenAddress:
		if !d.Addr.IsValid() || d.Addr.Zone() != "" || d.Addr.Is4In6() {
			return "" // an IPv4-mapped form: better no suggestion than a rule for it
		}
		return cidrRule(d.Addr, port)
	}
	return ""
}

func cidrRule(a netip.Addr, port uint16) string {
	return fmt.Sprintf("network.allow: [{cidr: %s, ports: [%d]}]", netip.PrefixFrom(a, a.BitLen()), port)
}
