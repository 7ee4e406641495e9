package config

import (
	"strings"
	"testing"
)

// TestChangedBesidesCredentials: a config that differs only in credentials (or where
// its lines are) may be reloaded; any other difference is named.
func TestChangedBesidesCredentials(t *testing.T) {
	parse := func(s string) *Config {
		t.Helper()
		c, err := Parse("serve.yaml", []byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	old := parse(good)
	for _, tc := range []struct{ name, next, want string }{
		{"the same", good, ""},
		{"a token revoked", strings.Replace(good, "      - {name: ci, roles: [agent], token_sha256: "+hashA+"}\n", "", 1), ""},
		{"a role taken", strings.Replace(good, "roles: [agent, auditor], uid: 1000", "roles: [auditor], uid: 1000", 1), ""},
		{"lines moved", "# a comment\n\n" + good, ""},
		{"a quota", strings.Replace(good, "    root: /srv/cordon/beta\n", "    root: /srv/cordon/beta\n    quotas: {sessions: 9}\n", 1), "Tenants[1].Quotas.Sessions"},
		{"a root", strings.Replace(good, "/srv/cordon/beta", "/srv/cordon/gamma", 1), "Tenants[1].Root"},
		{"a tenant", good + "  - name: gamma\n    root: /srv/cordon/gamma\n    credentials: [{name: ci, roles: [agent], uid: 7}]\n", "Tenants"},
		{"a pool", strings.Replace(good, "    root: /srv/cordon/beta\n", "    root: /srv/cordon/beta\n    pools: [{name: p, size: 1}]\n", 1), "Tenants[1].Pools"},
		{"a listener", strings.Replace(good, "127.0.0.1:8443", "127.0.0.1:9443", 1), "Listen.TCP.Address"},
	} {
		if got := old.ChangedBesidesCredentials(parse(tc.next)); got != tc.want {
			t.Errorf("%s: %q; want %q", tc.name, got, tc.want)
		}
	}
}
