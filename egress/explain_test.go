package egress

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestDenialText checks what a denied client is told: the status line (the reason phrase
// for CONNECT), the X-Cordon-* headers, the body, and the event; and that nothing of the
// contract's other rules appears in any of it.
func TestDenialText(t *testing.T) {
	e, _, _ := deniedEnv(t)
	tests := []struct {
		name, req, status, cat, rule, body string
	}{
		{"connect not in allowlist", "CONNECT evil.com:443 HTTP/1.1\r\n\r\n",
			"403 cordon: evil.com:443 not in network.allow", "not in network.allow",
			"network.allow: [{host: evil.com, ports: [443]}]", `no rule allows host "evil.com"`},
		{"http port not allowed", "GET http://allowed.com:8080/ HTTP/1.1\r\nHost: allowed.com:8080\r\n\r\n",
			"403 Forbidden", "port not allowed",
			"network.allow: [{host: allowed.com, ports: [8080]}]", `no rule allows host "allowed.com" on port 8080`},
		{"connect private literal", "CONNECT 10.0.0.9:443 HTTP/1.1\r\n\r\n",
			"403 cordon: 10.0.0.9:443 private address", "private address",
			"network.allow: [{cidr: 10.0.0.9/32, ports: [443]}]", "address 10.0.0.9 is private and no cidr rule names it"},
		{"connect resolves to private", "CONNECT internal.test:443 HTTP/1.1\r\n\r\n",
			"403 cordon: internal.test:443 resolves to a forbidden address", "resolves to a forbidden address",
			"network.allow: [{cidr: 10.0.0.5/32, ports: [443]}]", "address 10.0.0.5 is private and no cidr rule names it"},
		{"connect malformed", "CONNECT 0x7f.1:443 HTTP/1.1\r\n\r\n",
			"403 cordon: 0x7f.1:443 malformed request", "malformed request",
			"", `malformed host "0x7f.1": not a canonical ipv4 address`},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, _, _ := rawExchange(t, e, tt.req)
			body := readBody(t, resp.Body)
			hostport := strings.TrimPrefix(strings.Fields(tt.req)[1], "http://")
			hostport = strings.TrimSuffix(hostport, "/")
			var rules []string
			if tt.rule != "" {
				rules = []string{tt.rule}
			}
			if resp.Status != tt.status || body != denyBody(hostport, tt.body, rules...) {
				t.Errorf("got %q %q\nwant %q %q", resp.Status, body, tt.status, denyBody(hostport, tt.body, rules...))
			}
			if got := resp.Header.Get("X-Cordon-Denied"); got != tt.cat {
				t.Errorf("X-Cordon-Denied %q, want %q", got, tt.cat)
			}
			if got := resp.Header.Get("X-Cordon-Allow-Rule"); got != tt.rule {
				t.Errorf("X-Cordon-Allow-Rule %q, want %q", got, tt.rule)
			}
			_, ev := e.events.nth(t, i+1)
			if ev.Category != tt.cat || ev.SuggestedRule != tt.rule {
				t.Errorf("event category %q rule %q, want %q %q", ev.Category, ev.SuggestedRule, tt.cat, tt.rule)
			}
			all := resp.Status + body + strings.Join(resp.Header.Values("X-Cordon-Denied"), "") + resp.Header.Get("X-Cordon-Allow-Rule")
			for _, other := range []string{"loop.test", "meta.test", "internal.test", "allowed.com", "127.0.0.1"} {
				if strings.Contains(all, other) && !strings.Contains(tt.req, other) {
					t.Errorf("the denial shows %q, another rule's destination: %q", other, all)
				}
			}
		})
	}
}

// TestDenialSeenByGo checks that Go's HTTP client, which shows only the CONNECT reason
// phrase, says why.
func TestDenialSeenByGo(t *testing.T) {
	e, _, _ := deniedEnv(t)
	u, _ := url.Parse("http://" + e.addr)
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(u)}}
	resp, err := c.Get("https://evil.com/")
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		t.Fatal("a denied CONNECT succeeded")
	}
	if want := "cordon: evil.com:443 not in network.allow"; !strings.Contains(err.Error(), want) {
		t.Errorf("go client error %q, want it to contain %q", err, want)
	}
}

// TestDenialSeenByCurl checks the CONNECT status line curl prints.
func TestDenialSeenByCurl(t *testing.T) {
	e, _, _ := deniedEnv(t)
	_, errOut, code := curl(t, "-v", "-x", "http://"+e.addr, "https://evil.test/")
	if want := "< HTTP/1.1 403 cordon: evil.test:443 not in network.allow"; code != 56 || !strings.Contains(errOut, want) {
		t.Errorf("curl exit %d stderr %q; want 56 and %q", code, errOut, want)
	}
}
