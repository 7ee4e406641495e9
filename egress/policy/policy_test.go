package policy

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name  string
		rules []Rule
		want  []string // substrings of the joined error
	}{
		{"neither", []Rule{{}}, []string{"rule 0", "neither host nor cidr"}},
		{"both", []Rule{{Host: "a.com", CIDR: netip.MustParsePrefix("10.0.0.0/8")}}, []string{"both host"}},
		{"host is address", []Rule{{Host: "127.0.0.1"}}, []string{"is an address: use cidr"}},
		{"malformed host", []Rule{{Host: "a_b.com"}}, []string{"malformed host"}},
		{"noncanonical address", []Rule{{Host: "127.1"}}, []string{"malformed host"}},
		{"bare star", []Rule{{Host: "*"}}, []string{"'*' is only allowed"}},
		{"inner star", []Rule{{Host: "a.*.com"}}, []string{"'*' is only allowed"}},
		{"star suffix", []Rule{{Host: "*a.com"}}, []string{"'*' is only allowed"}},
		{"double star", []Rule{{Host: "*.*.com"}}, []string{"'*' is only allowed"}},
		{"tld wildcard", []Rule{{Host: "*.com"}}, []string{"below the top level"}},
		{"host bits", []Rule{{CIDR: netip.MustParsePrefix("10.0.0.5/8")}}, []string{"did you mean 10.0.0.0/8"}},
		{"port zero", []Rule{{Host: "a.com", Ports: []uint16{443, 0}}}, []string{"port 0"}},
		{
			"every problem reported",
			[]Rule{{Host: "ok.com"}, {}, {Host: "x..y", Ports: []uint16{0}}},
			[]string{"rule 1", "rule 2", "malformed host", "port 0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(tt.rules)
			if err == nil {
				t.Fatalf("New(%v) = %v, nil; want an error", tt.rules, p)
			}
			if !errors.Is(err, ErrInvalidRule) {
				t.Errorf("New: got %v; want it to wrap ErrInvalidRule", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("New: got %q; want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestNewNormalises(t *testing.T) {
	p, err := New([]Rule{
		{Host: "Proxy.Golang.ORG.", Why: "modules"},
		{Host: "*.Bücher.example", Ports: []uint16{8443, 443, 443}},
		{CIDR: netip.MustParsePrefix("127.0.0.0/8"), Ports: []uint16{8080}},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := p.Rules()
	want := []string{"proxy.golang.org:80,443", "*.xn--bcher-kva.example:443,8443", "127.0.0.0/8:8080"}
	for i, r := range got {
		if r.String() != want[i] {
			t.Errorf("rule %d: got %q; want %q", i, r, want[i])
		}
	}
	if got[0].Why != "modules" {
		t.Errorf("Why: got %q; want %q", got[0].Why, "modules")
	}
	got[1].Ports[0] = 1 // Rules returns copies
	if again := p.Rules(); again[1].Ports[0] != 443 {
		t.Errorf("Rules shares its slices with the policy")
	}
}

func TestVerdictString(t *testing.T) {
	var zero Verdict
	for v, want := range map[Verdict]string{zero: "deny", Allow: "allow", Resolve: "resolve", 7: "verdict(7)"} {
		if got := v.String(); got != want {
			t.Errorf("Verdict(%d).String() = %q; want %q", int(v), got, want)
		}
	}
}

// testPolicy is the rule set most Decide cases run against.
func testPolicy(t testing.TB) *Policy {
	t.Helper()
	p, err := New([]Rule{
		{Host: "allowed.com"},
		{Host: "*.example.com", Ports: []uint16{443}},
		{Host: "api.internal.test", Ports: []uint16{443, 8443}},
		{Host: "loop.test", Ports: []uint16{80}},
		{CIDR: netip.MustParsePrefix("127.0.0.0/8"), Ports: []uint16{8080}},
		{CIDR: netip.MustParsePrefix("10.1.0.0/16"), Ports: []uint16{8443}},
		{CIDR: netip.MustParsePrefix("2001:db8::/32"), Ports: []uint16{8443}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDecide(t *testing.T) {
	p := testPolicy(t)
	addr := netip.MustParseAddr
	tests := []struct {
		name     string
		args     DecideArgs
		want     Verdict
		wantRule string // String of the matched rule; "" for none
		reason   string // substring of Reason
	}{
		{"exact name", DecideArgs{Host: "allowed.com", Port: 443}, Resolve, "allowed.com:80,443", "checked next"},
		{"exact name public addr", DecideArgs{Host: "allowed.com", Port: 443, Addr: addr("93.184.216.34")}, Allow, "allowed.com:80,443", "matches rule"},
		{"uppercase trailing dot", DecideArgs{Host: "ALLOWED.com.", Port: 80}, Resolve, "allowed.com:80,443", ""},
		{"wrong port", DecideArgs{Host: "allowed.com", Port: 22}, Deny, "", `no rule allows host "allowed.com" on port 22`},
		{"wildcard subdomain", DecideArgs{Host: "a.example.com", Port: 443}, Resolve, "*.example.com:443", ""},
		{"wildcard deep", DecideArgs{Host: "a.b.c.example.com", Port: 443}, Resolve, "*.example.com:443", ""},
		{"wildcard not apex", DecideArgs{Host: "example.com", Port: 443}, Deny, "", `no rule allows host "example.com"`},
		{"suffix trick", DecideArgs{Host: "evilexample.com", Port: 443}, Deny, "", "no rule allows host"},
		{"prefix trick", DecideArgs{Host: "allowed.com.evil.com", Port: 443}, Deny, "", `no rule allows host "allowed.com.evil.com"`},
		{"glued trick", DecideArgs{Host: "evilallowed.com", Port: 443}, Deny, "", "no rule allows host"},
		{"userinfo trick", DecideArgs{Host: "allowed.com@evil.com", Port: 443}, Deny, "", "userinfo"},
		{"fragment trick", DecideArgs{Host: "evil.com#.allowed.com", Port: 443}, Deny, "", "malformed host"},
		{"hex ipv4", DecideArgs{Host: "0x7f.1", Port: 8080}, Deny, "", "malformed host"},
		{"decimal ipv4", DecideArgs{Host: "2130706433", Port: 8080}, Deny, "", "malformed host"},
		{"octal ipv4", DecideArgs{Host: "0177.0.0.1", Port: 8080}, Deny, "", "malformed host"},
		{"short ipv4", DecideArgs{Host: "127.1", Port: 8080}, Deny, "", "malformed host"},
		{"empty host", DecideArgs{Host: "", Port: 443}, Deny, "", "malformed host"},
		{"port zero", DecideArgs{Host: "allowed.com", Port: 0}, Deny, "", "port 0"},

		{"host rule private addr", DecideArgs{Host: "api.internal.test", Port: 443, Addr: addr("10.0.0.5")}, Deny, "",
			"address 10.0.0.5 is private and no cidr rule names it"},
		{"host rule loopback addr", DecideArgs{Host: "loop.test", Port: 80, Addr: addr("127.0.0.1")}, Deny, "",
			"address 127.0.0.1 is loopback and no cidr rule names it"},
		{"host rule metadata addr", DecideArgs{Host: "allowed.com", Port: 80, Addr: addr("169.254.169.254")}, Deny, "",
			"link-local (cloud metadata)"},
		{"host rule cgnat addr", DecideArgs{Host: "allowed.com", Port: 80, Addr: addr("100.64.1.1")}, Deny, "", "cgnat"},
		{"host rule mapped addr", DecideArgs{Host: "allowed.com", Port: 80, Addr: addr("::ffff:8.8.8.8")}, Deny, "", "ipv4-mapped"},
		{"host rule ula addr", DecideArgs{Host: "allowed.com", Port: 80, Addr: addr("fd00::1")}, Deny, "", "unique local"},
		{"host rule nat64 loopback", DecideArgs{Host: "allowed.com", Port: 80, Addr: addr("64:ff9b::7f00:1")}, Deny, "", "loopback (via nat64)"},
		{"host rule cidr named private", DecideArgs{Host: "api.internal.test", Port: 8443, Addr: addr("10.1.2.3")}, Allow,
			"10.1.0.0/16:8443", "is in rule"},
		{"host rule cidr other port", DecideArgs{Host: "api.internal.test", Port: 443, Addr: addr("10.1.2.3")}, Deny, "",
			"address 10.1.2.3 is private and no cidr rule names it on port 443"},
		{"cidr port makes names resolvable", DecideArgs{Host: "evil.test", Port: 8443}, Resolve, "", "cidr rule may allow"},

		{"name only cidr may allow", DecideArgs{Host: "anything.test", Port: 8080}, Resolve, "", "cidr rule may allow"},
		{"name resolves into cidr", DecideArgs{Host: "anything.test", Port: 8080, Addr: addr("127.0.0.1")}, Allow, "127.0.0.0/8:8080", ""},
		{"name resolves outside cidr", DecideArgs{Host: "anything.test", Port: 8080, Addr: addr("8.8.8.8")}, Deny, "",
			`no rule allows host "anything.test" or its address 8.8.8.8`},
		{"name no rule on port", DecideArgs{Host: "anything.test", Port: 9999}, Deny, "", `no rule allows host "anything.test"`},

		{"literal in cidr", DecideArgs{Host: "127.0.0.1", Port: 8080}, Allow, "127.0.0.0/8:8080", ""},
		{"literal in cidr other port", DecideArgs{Host: "127.0.0.1", Port: 8081}, Deny, "", "no rule allows address 127.0.0.1 on port 8081"},
		{"literal private", DecideArgs{Host: "10.0.0.5", Port: 443}, Deny, "", "address 10.0.0.5 is private and no cidr rule names it"},
		{"literal public", DecideArgs{Host: "8.8.8.8", Port: 443}, Deny, "", "no cidr rule allows address 8.8.8.8"},
		{"literal ipv6 in cidr", DecideArgs{Host: "[2001:db8::1]", Port: 8443}, Allow, "2001:db8::/32:8443", ""},
		{"literal mapped not in v4 cidr", DecideArgs{Host: "::ffff:127.0.0.1", Port: 8080}, Deny, "", "ipv4-mapped"},
		{"literal with same addr", DecideArgs{Host: "127.0.0.1", Port: 8080, Addr: addr("127.0.0.1")}, Allow, "127.0.0.0/8:8080", ""},
		{"literal with other addr", DecideArgs{Host: "127.0.0.1", Port: 8080, Addr: addr("127.0.0.2")}, Deny, "", "not the requested address"},
		{"literal metadata", DecideArgs{Host: "169.254.169.254", Port: 80}, Deny, "", "cloud metadata"},
		{"literal unspecified", DecideArgs{Host: "0.0.0.0", Port: 80}, Deny, "", "unspecified"},
		{"literal v6 loopback", DecideArgs{Host: "[::1]", Port: 8080}, Deny, "", "loopback"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := p.Decide(tt.args)
			var gotRule string
			if d.Rule.Host != "" || d.Rule.CIDR.IsValid() {
				gotRule = d.Rule.String()
			}
			if d.Verdict != tt.want || gotRule != tt.wantRule || !strings.Contains(d.Reason, tt.reason) {
				t.Fatalf("Decide(%+v) = %v, rule %q, %q; want %v, rule %q, reason containing %q",
					tt.args, d.Verdict, gotRule, d.Reason, tt.want, tt.wantRule, tt.reason)
			}
			if d.Verdict != Deny && d.Reason == "" {
				t.Errorf("Decide(%+v): empty reason", tt.args)
			}
		})
	}
}

func TestDecideNilAndEmpty(t *testing.T) {
	empty, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]*Policy{"nil": nil, "empty": empty} {
		for _, args := range []DecideArgs{
			{Host: "example.com", Port: 443},
			{Host: "127.0.0.1", Port: 80},
			{Host: "example.com", Port: 443, Addr: netip.MustParseAddr("1.1.1.1")},
		} {
			if d := p.Decide(args); d.Verdict != Deny {
				t.Errorf("%s policy: Decide(%+v) = %v; want deny", name, args, d.Verdict)
			}
		}
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		addr string
		want string
	}{
		{"8.8.8.8", ""},
		{"1.1.1.1", ""},
		{"2606:4700::1111", ""},
		{"10.0.0.5", "private"},
		{"172.16.0.1", "private"},
		{"172.31.255.255", "private"},
		{"172.32.0.1", ""},
		{"192.168.1.1", "private"},
		{"127.0.0.1", "loopback"},
		{"127.255.255.254", "loopback"},
		{"169.254.169.254", "link-local (cloud metadata)"},
		{"169.254.1.1", "link-local"},
		{"100.64.0.1", "cgnat"},
		{"100.127.255.255", "cgnat"},
		{"100.128.0.1", ""},
		{"224.0.0.1", "multicast"},
		{"255.255.255.255", "reserved"},
		{"0.0.0.0", "unspecified"},
		{"::", "unspecified"},
		{"::1", "loopback"},
		{"::ffff:8.8.8.8", "ipv4-mapped"},
		{"fd00:ec2::254", "private (unique local)"},
		{"fe80::1", "link-local"},
		{"ff02::1", "multicast"},
		{"64:ff9b::a00:5", "private (via nat64)"},
		{"64:ff9b::808:808", ""},
		{"2002:7f00:1::", "loopback (via 6to4)"},
		{"2002:808:808::", ""},
		{"::127.0.0.1", "reserved"},
		{"4000::1", "reserved"},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			if got := classify(netip.MustParseAddr(tt.addr)); got != tt.want {
				t.Fatalf("classify(%s) = %q; want %q", tt.addr, got, tt.want)
			}
		})
	}
	if got := classify(netip.Addr{}); got == "" {
		t.Errorf("classify(invalid) = %q; want non-empty", got)
	}
}

func TestRuleStringDefaultPorts(t *testing.T) {
	r := Rule{Host: "a.com"}
	if got := r.String(); got != "a.com:80,443" {
		t.Errorf("got %q", got)
	}
	if !slices.Equal(defaultPorts, []uint16{80, 443}) {
		t.Errorf("defaultPorts changed: %v", defaultPorts)
	}
}
