package policy

import (
	"errors"
	"strings"
	"testing"
)

func TestNormalize(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // "" means an error wrapping ErrMalformedHost
	}{
		{"plain", "proxy.golang.org", "proxy.golang.org"},
		{"uppercase", "Proxy.GoLang.ORG", "proxy.golang.org"},
		{"one trailing dot", "example.com.", "example.com"},
		{"two trailing dots", "example.com..", ""},
		{"single label", "localhost", "localhost"},
		{"idn to punycode", "bücher.example", "xn--bcher-kva.example"},
		{"punycode kept", "xn--bcher-kva.example", "xn--bcher-kva.example"},
		{"punycode uppercase", "XN--BCHER-KVA.example", "xn--bcher-kva.example"},
		{"fullwidth letters map", "ａｌｌｏｗｅｄ.com", "allowed.com"},
		{"double hyphen at 3", "r3---sn-x.googlevideo.com", "r3---sn-x.googlevideo.com"},
		{"digit label inside", "a.1.example", "a.1.example"},
		{"ipv4", "127.0.0.1", "127.0.0.1"},
		{"ipv4 trailing dot", "10.0.0.5.", "10.0.0.5"},
		{"ipv6 bracketed", "[::1]", "::1"},
		{"ipv6 bare", "::1", "::1"},
		{"ipv6 canonicalised", "[2001:DB8:0:0::1]", "2001:db8::1"},
		{"ipv4 mapped ipv6", "[::ffff:127.0.0.1]", "::ffff:127.0.0.1"},

		{"empty", "", ""},
		{"only dot", ".", ""},
		{"userinfo", "allowed.com@evil.com", ""},
		{"fragment", "evil.com#.allowed.com", ""},
		{"path", "evil.com/.allowed.com", ""},
		{"percent", "%65vil.com", ""},
		{"port", "example.com:443", ""},
		{"space", "exa mple.com", ""},
		{"underscore", "a_b.example.com", ""},
		{"leading hyphen", "-a.example.com", ""},
		{"trailing hyphen", "a-.example.com", ""},
		{"empty label", "a..example.com", ""},
		{"leading dot", ".example.com", ""},
		{"wildcard", "*.example.com", ""},
		{"nul", "example.com\x00.evil", ""},
		{"newline", "example.com\r\nx: y", ""},
		{"long label", strings.Repeat("a", 64) + ".com", ""},
		{"long name", strings.Repeat("a.", 127) + "com", ""},
		{"zero width joiner", "ex\u200dample.com", ""},
		{"invalid punycode", "xn--.example", ""},
		{"hex ipv4", "0x7f.1", ""},
		{"hex ipv4 full", "0x7f.0x0.0x0.0x1", ""},
		{"decimal ipv4", "2130706433", ""},
		{"octal ipv4", "0177.0.0.1", ""},
		{"short ipv4", "127.1", ""},
		{"five parts", "1.2.3.4.5", ""},
		{"numeric tld", "example.123", ""},
		{"hex tld", "example.0x", ""},
		{"fullwidth digits", "１２７.０.０.１", ""},
		{"ipv4 in brackets", "[127.0.0.1]", ""},
		{"unbalanced bracket", "[::1", ""},
		{"zone", "fe80::1%eth0", ""},
		{"bracketed zone", "[fe80::1%25eth0]", ""},
		{"bracket with port", "[::1]:80", ""},
		{"fullwidth dot trailing", "a.com\u3002", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Normalize(tt.in)
			if tt.want == "" {
				if !errors.Is(err, ErrMalformedHost) {
					t.Fatalf("Normalize(%q) = %q, %v; want ErrMalformedHost", tt.in, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Normalize(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
			if again, err := Normalize(got); again != got || err != nil {
				t.Fatalf("Normalize(%q) = %q, %v; want it unchanged", got, again, err)
			}
		})
	}
}

func TestSplitHostPort(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		wantHost string
		wantPort uint16
		wantErr  error
	}{
		{"name", "example.com:443", "example.com", 443, nil},
		{"ipv4", "127.0.0.1:80", "127.0.0.1", 80, nil},
		{"ipv6", "[::1]:8080", "::1", 8080, nil},
		{"max port", "a:65535", "a", 65535, nil},
		{"no port", "example.com", "", 0, ErrMalformedPort},
		{"empty port", "example.com:", "", 0, ErrMalformedPort},
		{"port zero", "example.com:0", "", 0, ErrMalformedPort},
		{"leading zero", "example.com:080", "", 0, ErrMalformedPort},
		{"too big", "example.com:65536", "", 0, ErrMalformedPort},
		{"sign", "example.com:+80", "", 0, ErrMalformedPort},
		{"space", "example.com: 80", "", 0, ErrMalformedPort},
		{"hex", "example.com:0x50", "", 0, ErrMalformedPort},
		{"two colons", "a:b:80", "", 0, ErrMalformedHost},
		{"bare ipv6", "::1:80", "", 0, ErrMalformedHost},
		{"empty host", ":80", "", 0, ErrMalformedHost},
		{"empty brackets", "[]:80", "", 0, ErrMalformedHost},
		{"unbalanced", "[::1:80", "", 0, ErrMalformedHost},
		{"junk after bracket", "[::1]x:80", "", 0, ErrMalformedPort},
		{"bracket no port", "[::1]", "", 0, ErrMalformedPort},
		{"long port", "a:000080", "", 0, ErrMalformedPort},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host, port, err := SplitHostPort(tt.in)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("SplitHostPort(%q) = %q, %d, %v; want %v", tt.in, host, port, err, tt.wantErr)
				}
				return
			}
			if err != nil || host != tt.wantHost || port != tt.wantPort {
				t.Fatalf("SplitHostPort(%q) = %q, %d, %v; want %q, %d", tt.in, host, port, err, tt.wantHost, tt.wantPort)
			}
		})
	}
}
