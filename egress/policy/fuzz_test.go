package policy

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

// FuzzNormalize checks that Normalize never panics, that what it accepts is either a
// canonical IP literal or a plain LDH name, and that it is idempotent. The seed corpus
// lives in testdata/fuzz/FuzzNormalize.
func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"example.com", "[::1]", "0x7f.1", "bücher.example", "a@b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := Normalize(in)
		if err != nil {
			if got != "" {
				t.Fatalf("Normalize(%q) = %q with error %v", in, got, err)
			}
			return
		}
		if addr, err := netip.ParseAddr(got); err == nil {
			if addr.String() != got || addr.Zone() != "" {
				t.Fatalf("Normalize(%q) = %q: not a canonical address", in, got)
			}
		} else if why := checkLDH(got); why != "" || endsInNumber(got) {
			t.Fatalf("Normalize(%q) = %q: not LDH (%s)", in, got, why)
		}
		if strings.ContainsAny(got, "@#/%?\\ \x00[]*") {
			t.Fatalf("Normalize(%q) = %q: contains a forbidden character", in, got)
		}
		again, err := Normalize(got)
		if err != nil || again != got {
			t.Fatalf("Normalize(Normalize(%q)) = %q, %v; want %q", in, again, err, got)
		}
	})
}

// FuzzSplitHostPort checks that SplitHostPort never panics and that a split it accepts
// joins back into its input.
func FuzzSplitHostPort(f *testing.F) {
	for _, s := range []string{"example.com:443", "[::1]:80", "a:b:c", "[::1", "x:080"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		host, port, err := SplitHostPort(in)
		if err != nil {
			return
		}
		if port == 0 || host == "" {
			t.Fatalf("SplitHostPort(%q) = %q, %d: accepted an empty part", in, host, port)
		}
		joined := host + ":" + strconv.Itoa(int(port))
		if strings.Contains(host, ":") || strings.HasPrefix(in, "[") {
			joined = "[" + host + "]:" + strconv.Itoa(int(port))
		}
		if joined != in {
			t.Fatalf("SplitHostPort(%q) = %q, %d; rejoined as %q", in, host, port, joined)
		}
	})
}

// FuzzDecide checks that Decide never panics and never allows what the rules do not: a
// name allowed by a host rule is one of the listed names, an allowed special address is
// inside a cidr rule, and a name-only question never yields Allow. The seed corpus lives in
// testdata/fuzz/FuzzDecide.
func FuzzDecide(f *testing.F) {
	f.Add("allowed.com", uint16(443), "")
	f.Add("a.example.com", uint16(443), "10.0.0.5")
	f.Add("127.0.0.1", uint16(8080), "")
	f.Add("anything.test", uint16(8080), "127.0.0.1")
	f.Add("allowed.com.evil.com", uint16(443), "1.2.3.4")
	p := testPolicy(f)
	f.Fuzz(func(t *testing.T, host string, port uint16, addr string) {
		a, _ := netip.ParseAddr(addr)
		d := p.Decide(DecideArgs{Host: host, Port: port, Addr: a})
		if d.Verdict == Deny {
			if d.Reason == "" {
				t.Fatalf("Decide(%q, %d, %q): deny without a reason", host, port, addr)
			}
			return
		}
		if d.Host == "" || port == 0 {
			t.Fatalf("Decide(%q, %d, %q) = %v for a malformed question", host, port, addr, d.Verdict)
		}
		lit, litErr := netip.ParseAddr(d.Host)
		if d.Verdict == Resolve {
			if litErr == nil {
				t.Fatalf("Decide(%q, %d): resolve for an IP literal", host, port)
			}
			return
		}
		if !a.IsValid() && litErr != nil {
			t.Fatalf("Decide(%q, %d): allowed a name without an address", host, port)
		}
		if litErr == nil && d.Addr != lit {
			t.Fatalf("Decide(%q, %d, %q): allowed %s, not the literal", host, port, addr, d.Addr)
		}
		if d.Rule.CIDR.IsValid() {
			if !d.Rule.CIDR.Contains(d.Addr) {
				t.Fatalf("Decide(%q, %d, %q): cidr rule %s does not contain %s", host, port, addr, d.Rule, d.Addr)
			}
		} else if classify(d.Addr) != "" {
			t.Fatalf("Decide(%q, %d, %q): host rule allowed special address %s", host, port, addr, d.Addr)
		}
		if !strings.HasSuffix(d.Host, ".example.com") && d.Rule.Host != "" && d.Rule.Host != d.Host {
			t.Fatalf("Decide(%q, %d, %q): rule %s does not name %q", host, port, addr, d.Rule, d.Host)
		}
	})
}
