package config

import (
	"strings"
	"testing"
)

// TestMetricsListener: listen.metrics takes a loopback host:port only.
func TestMetricsListener(t *testing.T) {
	for _, tc := range []struct{ value, want, err string }{
		{"{address: '127.0.0.1:9464'}", "127.0.0.1:9464", ""},
		{"{address: '127.0.0.2:0'}", "127.0.0.2:0", ""},
		{"{address: '[::1]:9464'}", "[::1]:9464", ""},
		{"{address: '0.0.0.0:9464'}", "", `f.yaml:3:22: listen.metrics.address: "0.0.0.0:9464" is not a loopback address`},
		{"{address: ':9464'}", "", `is not a loopback address`},
		{"{address: 'localhost:9464'}", "", `is not a loopback address`},
		{"{address: '10.0.0.1:9464'}", "", `is not a loopback address`},
		{"{address: '127.0.0.1'}", "", `want host:port`},
		{"{address: '127.0.0.1:http'}", "", `the port is not a number`},
		{"{address: '127.0.0.1:9464', auth: none}", "", `listen.metrics: unknown key "auth" (known: address)`},
		{"{}", "", `listen.metrics: missing "address"`},
	} {
		c, err := Parse("f.yaml", []byte("version: 1\nlisten:\n  metrics: "+tc.value+"\n  unix: {path: /run/c.sock}\ntenants: [{name: a, root: /a}]\n"))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.value, err)
		case tc.err == "" && c.Listen.Metrics.Address != tc.want:
			t.Errorf("%s: address %q; want %q", tc.value, c.Listen.Metrics.Address, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: got %v; want %s", tc.value, err, tc.err)
		}
	}
	if _, err := Parse("f.yaml", []byte("version: 1\nlisten: {metrics: {address: '127.0.0.1:1'}}\ntenants: [{name: a, root: /a}]\n")); err == nil {
		t.Error("a metrics listener alone: accepted; want \"unix\", \"tcp\" or both")
	}
}
