package policy

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"golang.org/x/net/idna"
)

// Errors returned by [Normalize], [SplitHostPort] and [New]. They are wrapped with the
// offending input; test for them with [errors.Is].
var (
	// ErrMalformedHost reports a destination host that is neither an LDH DNS name nor a
	// canonical IP literal.
	ErrMalformedHost = errors.New("malformed host")
	// ErrMalformedPort reports a port that is not a decimal number in 1..65535.
	ErrMalformedPort = errors.New("malformed port")
	// ErrInvalidRule reports a [Rule] that [New] cannot accept.
	ErrInvalidRule = errors.New("invalid rule")
)

const (
	maxHostLen  = 253  // RFC 1035, without the trailing dot
	maxLabelLen = 63   // RFC 1035
	maxInputLen = 1024 // bound the work done on hostile input before IDNA mapping
)

// idnaProfile maps internationalised names to their ASCII (punycode) form the way a
// browser does for lookup (UTS #46, non-transitional, bidi rule), but without the
// "no -- in positions 3 and 4" check, which real hosts such as r3---sn-x.googlevideo.com
// fail. Whatever it returns is checked again as strict LDH below.
var idnaProfile = idna.New(
	idna.MapForLookup(),
	idna.BidiRule(),
	idna.Transitional(false),
	idna.CheckHyphens(false),
	idna.VerifyDNSLength(true),
)

// Normalize returns the canonical form of a destination host, the form that is matched
// against rules, resolved, and compared with a TLS server name:
//   - a DNS name is lowercased, loses one trailing dot, is mapped to ASCII (punycode) and
//     must then be LDH: labels of 1 to 63 letters, digits and inner hyphens;
//   - an IPv4 literal must be canonical dotted decimal and is returned unchanged;
//   - an IPv6 literal, with or without brackets, is returned in its canonical text form
//     without brackets; zones are rejected.
//
// Normalize never guesses: userinfo ("a@b"), ports, paths, fragments, percent escapes and
// the non-canonical IPv4 spellings that inet_aton accepts ("127.1", "0x7f.1", "2130706433",
// "0177.0.0.1") are errors wrapping [ErrMalformedHost], so a string that one component would
// read as a name and another as an address never gets through. Normalize is idempotent on
// what it accepts.
func Normalize(host string) (string, error) {
	h, _, err := normalize(host)
	return h, err
}

// normalize is [Normalize] that also returns the address when host is an IP literal.
func normalize(host string) (string, netip.Addr, error) {
	switch {
	case host == "":
		return "", netip.Addr{}, malformed(host, "empty")
	case len(host) > maxInputLen:
		return "", netip.Addr{}, malformed(host, "too long")
	case strings.Contains(host, "@"):
		return "", netip.Addr{}, malformed(host, "userinfo is not allowed")
	case host[0] == '[':
		if len(host) < 2 || host[len(host)-1] != ']' {
			return "", netip.Addr{}, malformed(host, "unbalanced brackets")
		}
		return normalizeIPv6(host, host[1:len(host)-1])
	case strings.Contains(host, ":"):
		return normalizeIPv6(host, host)
	}
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	if isASCII(name) && endsInNumber(name) {
		// WHATWG URL's "ends in a number" rule: such a host is an IPv4 address or garbage,
		// never a name. Only the canonical dotted-decimal form is accepted.
		addr, err := netip.ParseAddr(name)
		if err != nil || !addr.Is4() || addr.String() != name {
			return "", netip.Addr{}, malformed(host, "not a canonical ipv4 address")
		}
		return name, addr, nil
	}
	if isASCII(name) {
		// Check before mapping so the reason names the offending character.
		if why := checkLDH(name); why != "" {
			return "", netip.Addr{}, malformed(host, why)
		}
	}
	ascii, err := idnaProfile.ToASCII(name)
	if err != nil {
		return "", netip.Addr{}, malformed(host, "not a valid domain name")
	}
	if endsInNumber(ascii) {
		// Non-ASCII digits (fullwidth "１２７.０.０.１") that map to an address.
		return "", netip.Addr{}, malformed(host, "not a canonical ipv4 address")
	}
	if why := checkLDH(ascii); why != "" {
		return "", netip.Addr{}, malformed(host, why)
	}
	return ascii, netip.Addr{}, nil
}

// normalizeIPv6 parses the inside of an IPv6 literal. raw is the whole input, for errors.
func normalizeIPv6(raw, s string) (string, netip.Addr, error) {
	addr, err := netip.ParseAddr(s)
	switch {
	case err != nil || !addr.Is6():
		return "", netip.Addr{}, malformed(raw, "not an ipv6 address")
	case addr.Zone() != "":
		return "", netip.Addr{}, malformed(raw, "ipv6 zones are not allowed")
	}
	return addr.String(), addr, nil
}

// checkLDH reports why name is not a plain LDH host name, or "" when it is one.
func checkLDH(name string) string {
	if name == "" {
		return "empty"
	}
	if len(name) > maxHostLen {
		return "longer than 253 characters"
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" {
			return "empty label"
		}
		if len(label) > maxLabelLen {
			return "label longer than 63 characters"
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return "label starts or ends with a hyphen"
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
				return fmt.Sprintf("character %q is not a letter, digit or hyphen", c)
			}
		}
	}
	return ""
}

// endsInNumber reports whether the last label of s is all decimal digits or a 0x-prefixed
// hexadecimal number, as in the WHATWG URL standard. Such hosts are IPv4 or invalid.
func endsInNumber(s string) bool {
	last := s[strings.LastIndexByte(s, '.')+1:]
	if last == "" {
		return false
	}
	if strings.HasPrefix(last, "0x") || strings.HasPrefix(last, "0X") {
		return strings.Trim(last[2:], "0123456789abcdefABCDEF") == ""
	}
	return strings.Trim(last, "0123456789") == ""
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// SplitHostPort splits "host:port" or "[ipv6]:port" strictly: exactly one colon outside
// brackets, a decimal port in 1..65535 without sign or leading zeros. The host is returned
// as given (brackets removed) and still needs [Normalize]; it is not checked here.
func SplitHostPort(hostport string) (host string, port uint16, err error) {
	var rest string
	if strings.HasPrefix(hostport, "[") {
		end := strings.IndexByte(hostport, ']')
		if end < 0 {
			return "", 0, malformed(hostport, "unbalanced brackets")
		}
		host, rest = hostport[1:end], hostport[end+1:]
		if !strings.HasPrefix(rest, ":") {
			return "", 0, fmt.Errorf("%w in %q: missing", ErrMalformedPort, hostport)
		}
		rest = rest[1:]
	} else {
		i := strings.IndexByte(hostport, ':')
		if i < 0 {
			return "", 0, fmt.Errorf("%w in %q: missing", ErrMalformedPort, hostport)
		}
		if strings.IndexByte(hostport[i+1:], ':') >= 0 {
			return "", 0, malformed(hostport, "too many colons (bracket ipv6 literals)")
		}
		host, rest = hostport[:i], hostport[i+1:]
	}
	if host == "" {
		return "", 0, malformed(hostport, "empty")
	}
	port, err = ParsePort(rest)
	if err != nil {
		return "", 0, err
	}
	return host, port, nil
}

// ParsePort parses a decimal port in 1..65535 with no sign, spaces or leading zeros.
func ParsePort(s string) (uint16, error) {
	if s == "" || len(s) > 5 || s[0] == '0' {
		return 0, fmt.Errorf("%w %q", ErrMalformedPort, s)
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%w %q", ErrMalformedPort, s)
		}
		n = n*10 + int(s[i]-'0')
	}
	if n > 65535 {
		return 0, fmt.Errorf("%w %q: out of range", ErrMalformedPort, s)
	}
	return uint16(n), nil
}

// malformed wraps ErrMalformedHost with the (possibly hostile) input, quoted and bounded so
// the message is safe to show to the workload and to log.
func malformed(host, why string) error {
	return fmt.Errorf("%w %s: %s", ErrMalformedHost, quote(host), why)
}

// quote returns s Go-quoted (control characters and invalid UTF-8 escaped), cut to 80 bytes.
func quote(s string) string {
	const limit = 80
	if len(s) > limit {
		return fmt.Sprintf("%q...", s[:limit])
	}
	return fmt.Sprintf("%q", s)
}
