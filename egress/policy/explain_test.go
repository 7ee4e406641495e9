package policy

import (
	"net/netip"
	"strings"
	"testing"
)

func TestCategoryAndSuggestRule(t *testing.T) {
	p, err := New([]Rule{
		{Host: "allowed.com", Ports: []uint16{443}},
		{Host: "secret-internal.corp", Ports: []uint16{443}},
		{CIDR: netip.MustParsePrefix("192.0.2.0/24"), Ports: []uint16{8080}},
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args DecideArgs
		cat  Category
		rule string
	}{
		{"name in no rule", DecideArgs{Host: "Example.COM.", Port: 443}, NotAllowed,
			"network.allow: [{host: example.com, ports: [443]}]"},
		{"name on another port", DecideArgs{Host: "allowed.com", Port: 22}, PortNotAllowed,
			"network.allow: [{host: allowed.com, ports: [22]}]"},
		{"public literal", DecideArgs{Host: "8.8.8.8", Port: 53}, NotAllowed,
			"network.allow: [{cidr: 8.8.8.8/32, ports: [53]}]"},
		{"literal on another port", DecideArgs{Host: "192.0.2.7", Port: 22}, PortNotAllowed,
			"network.allow: [{cidr: 192.0.2.7/32, ports: [22]}]"},
		{"private literal", DecideArgs{Host: "10.0.0.5", Port: 80}, PrivateAddress,
			"network.allow: [{cidr: 10.0.0.5/32, ports: [80]}]"},
		{"v6 loopback", DecideArgs{Host: "[::1]", Port: 80}, PrivateAddress,
			"network.allow: [{cidr: ::1/128, ports: [80]}]"},
		{"name resolving to loopback", DecideArgs{Host: "allowed.com", Port: 443, Addr: netip.MustParseAddr("127.0.0.1")},
			ForbiddenAddress, "network.allow: [{cidr: 127.0.0.1/32, ports: [443]}]"},
		{"malformed", DecideArgs{Host: "a_b.com", Port: 443}, Malformed, ""},
		{"port zero", DecideArgs{Host: "example.com"}, Malformed, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := p.Decide(tt.args)
			if d.Verdict != Deny || d.Category != tt.cat {
				t.Fatalf("Decide(%+v) = %v %v (%s); want deny, %v", tt.args, d.Verdict, d.Category, d.Reason, tt.cat)
			}
			got := SuggestRule(d, tt.args.Port)
			if got != tt.rule {
				t.Errorf("SuggestRule = %q; want %q", got, tt.rule)
			}
			// Nothing from the contract's other rules is ever shown.
			for _, s := range []string{got, d.Reason, d.Category.String()} {
				if strings.Contains(s, "secret-internal") || tt.args.Host != "allowed.com" && strings.Contains(s, "allowed.com") {
					t.Errorf("%q shows another rule of the contract", s)
				}
			}
		})
	}
	if d := p.Decide(DecideArgs{Host: "allowed.com", Port: 443}); d.Verdict != Resolve || SuggestRule(d, 443) != "" {
		t.Errorf("a name to resolve got category %v, rule %q", d.Category, SuggestRule(d, 443))
	}
	if Category(99).String() != "denied by contract" || Denied.String() != "denied by contract" {
		t.Error("an unknown category is not the generic denial")
	}
}
