package policy

import (
	"net/netip"
)

// special is an address range that a host rule never reaches: only a cidr rule that names
// the address does. what is the word used in the denial reason.
type special struct {
	prefix netip.Prefix
	what   string
}

// specials lists non-public ranges, most specific first (the first match names the range).
// Sources: IANA IPv4 and IPv6 Special-Purpose Address Registries, RFC 6890. The point is
// not completeness of the registry but that nothing internal (loopback, RFC 1918, link-local
// including the 169.254.169.254 cloud metadata service, CGNAT, ULA) is reachable by
// pointing an allowed name at it.
var specials = []special{
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "cgnat"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.169.254/32"), "link-local (cloud metadata)"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.0.0.0/24"), "reserved"},
	{netip.MustParsePrefix("192.0.2.0/24"), "reserved (documentation)"},
	{netip.MustParsePrefix("192.88.99.0/24"), "reserved"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("198.18.0.0/15"), "reserved (benchmarking)"},
	{netip.MustParsePrefix("198.51.100.0/24"), "reserved (documentation)"},
	{netip.MustParsePrefix("203.0.113.0/24"), "reserved (documentation)"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"}, // includes 255.255.255.255

	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("::ffff:0:0/96"), "ipv4-mapped"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "reserved (local nat64)"},
	{netip.MustParsePrefix("100::/64"), "reserved (discard)"},
	{netip.MustParsePrefix("2001::/32"), "reserved (teredo)"},
	{netip.MustParsePrefix("2001:db8::/32"), "reserved (documentation)"},
	{netip.MustParsePrefix("fc00::/7"), "private (unique local)"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fec0::/10"), "reserved (site-local)"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

var (
	globalUnicast6 = netip.MustParsePrefix("2000::/3")
	nat64          = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour      = netip.MustParsePrefix("2002::/16")
)

// classify returns what kind of special address a is ("private", "loopback", ...), or ""
// for a public unicast address. IPv6 addresses that embed an IPv4 address and are routed
// to it by translators (NAT64 64:ff9b::/96, 6to4 2002::/16) are classified by the embedded
// address, so 64:ff9b::7f00:1 is loopback; any other IPv6 address outside 2000::/3 is
// reserved.
func classify(a netip.Addr) string {
	if !a.IsValid() {
		return "invalid"
	}
	if a.Zone() != "" {
		return "zoned"
	}
	for _, s := range specials {
		if s.prefix.Contains(a) {
			return s.what
		}
	}
	if a.Is4() {
		return ""
	}
	b := a.As16()
	switch {
	case nat64.Contains(a):
		return embedded(netip.AddrFrom4([4]byte(b[12:16])), "nat64")
	case sixToFour.Contains(a):
		return embedded(netip.AddrFrom4([4]byte(b[2:6])), "6to4")
	case !globalUnicast6.Contains(a):
		return "reserved"
	}
	return ""
}

// embedded classifies the IPv4 address carried inside a translated IPv6 address.
func embedded(v4 netip.Addr, via string) string {
	if what := classify(v4); what != "" {
		return what + " (via " + via + ")"
	}
	return ""
}
