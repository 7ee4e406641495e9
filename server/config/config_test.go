package config

import (
	"errors"
	"strings"
	"testing"
)

const hashA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
const hashB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

const good = `version: 1
listen:
  unix: {path: /run/cordon/cordon.sock, group: cordon}
  tcp: {address: "127.0.0.1:8443", cert: /etc/cordon/tls.crt, key: /etc/cordon/tls.key, client_ca: /etc/cordon/ca.crt}
tenants:
  - name: acme
    root: /srv/cordon/acme
    credentials:
      - {name: ci, roles: [agent], token_sha256: ` + hashA + `}
      - {name: lead, roles: [approver, auditor], client_cert: {common_name: lead.acme}}
      - {name: local, roles: [agent, auditor], uid: 1000}
  - name: beta
    root: /srv/cordon/beta
    credentials:
      - {name: ci, roles: [agent], token_sha256: ` + hashB + `}
`

func TestParseGood(t *testing.T) {
	c, err := Parse("serve.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Listen.Unix.Mode; got != 0o660 {
		t.Errorf("socket mode with a group: got %04o; want 0660", got)
	}
	if len(c.Tenants) != 2 || len(c.Tenants[0].Credentials) != 3 {
		t.Fatalf("tenants: got %+v", c.Tenants)
	}
	cr := c.Tenants[0].Credentials
	if cr[0].TokenSHA256 == nil || cr[0].TokenSHA256[0] != 0xaa || cr[0].Roles != RoleAgent {
		t.Errorf("token credential: got %+v", cr[0])
	}
	if cr[1].ClientCert == nil || cr[1].ClientCert.CommonName != "lead.acme" || cr[1].Roles.String() != "approver,auditor" {
		t.Errorf("cert credential: got %+v", cr[1])
	}
	if cr[2].UID == nil || *cr[2].UID != 1000 {
		t.Errorf("uid credential: got %+v", cr[2])
	}
}

// base is a valid config whose tenants follow; bad cases append to it, so line numbers
// below count from its 4 lines.
const base = `version: 1
listen:
  unix: {path: /run/cordon/cordon.sock}
tenants:
`

// TestParseRefuses: every refusal, with its exact position and wording.
func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"unknown top key", "version: 1\nlisten: {unix: {path: /s}}\ntenants: []\nextra: 1\n", []string{
			`f.yaml:4:1: config: unknown key "extra" (known: version, listen, tenants)`,
			`f.yaml:3:10: tenants: empty; a server with no tenant has no one to serve`}},
		{"missing version", "listen: {unix: {path: /s}}\ntenants: [{name: a, root: /a}]\n", []string{
			`f.yaml:1:1: config: missing "version: 1"`}},
		{"version 2", "version: 2\nlisten: {unix: {path: /s}}\ntenants: [{name: a, root: /a}]\n", []string{
			`f.yaml:1:10: version: 2 is not supported; this cordon reads version 1`}},
		{"unknown listen key", "version: 1\nlisten: {unix: {path: /s}, http: {}}\ntenants: [{name: a, root: /a}]\n", []string{
			`f.yaml:2:28: listen: unknown key "http" (known: unix, tcp, metrics, timeouts)`}},
		{"tcp without TLS", "version: 1\nlisten:\n  tcp: {address: ':8443'}\ntenants: [{name: a, root: /a}]\n", []string{
			`f.yaml:3:8: listen.tcp: a TCP listener needs TLS: set "cert" and "key" (tokens must never cross a network in clear)`}},
		{"relative socket", "version: 1\nlisten: {unix: {path: run/s}}\ntenants: [{name: a, root: /a}]\n", []string{
			`f.yaml:2:23: listen.unix.path: "run/s" is not an absolute path`}},
		{"world-only mode", "version: 1\nlisten: {unix: {path: /s, mode: '0066'}}\ntenants: [{name: a, root: /a}]\n", []string{
			`f.yaml:2:33: listen.unix.mode: "0066" must let the server's own user read and write (0600)`}},
		{"duplicate tenant", base + "  - {name: a, root: /a}\n  - {name: a, root: /b}\n", []string{
			`f.yaml:6:5: tenant "a": the name is already used at line 5`}},
		{"root inside another", base + "  - {name: a, root: /srv/a}\n  - {name: b, root: /srv/a/b}\n", []string{
			`f.yaml:6:5: tenant "b": root /srv/a/b overlaps tenant "a"'s root /srv/a (line 5): a tenant's root must not be inside another's`}},
		{"root holding another", base + "  - {name: a, root: /srv/a/b/}\n  - {name: b, root: /srv/a}\n", []string{
			`f.yaml:6:5: tenant "b": root /srv/a overlaps tenant "a"'s root /srv/a/b (line 5): a tenant's root must not be inside another's`}},
		{"root holding another's disk image", base + "  - {name: a, root: /srv/a}\n  - {name: b, root: /srv/a.disk/b}\n", []string{
			`f.yaml:6:5: tenant "b": root /srv/a.disk/b and tenant "a"'s disk image /srv/a.disk overlap: a tenant's disk must be out of every tenant's reach`}},
		{"root holds the socket", base + "  - {name: a, root: /run}\n", []string{
			`f.yaml:5:5: tenant "a": root /run holds the server's socket /run/cordon/cordon.sock`}},
		{"duplicate credential", base + "  - name: a\n    root: /a\n    credentials:\n      - {name: c, roles: [agent], uid: 1}\n      - {name: c, roles: [auditor], uid: 2}\n", []string{
			`f.yaml:9:9: credential "c": the name is already used in tenant "a" at line 8`}},
		{"token twice", base + "  - name: a\n    root: /a\n    credentials:\n      - {name: c, roles: [agent], token_sha256: " + hashA + "}\n  - name: b\n    root: /b\n    credentials:\n      - {name: d, roles: [agent], token_sha256: " + hashA + "}\n", []string{
			`f.yaml:12:9: credential "d": token_sha256 aaaaaaaa… is already mapped at line 8; one identity maps to one credential`}},
		{"uid twice", base + "  - name: a\n    root: /a\n    credentials:\n      - {name: c, roles: [agent], uid: 0}\n      - {name: d, roles: [auditor], uid: 0}\n", []string{
			`f.yaml:9:9: credential "d": uid 0 is already mapped at line 8; one identity maps to one credential`}},
		{"cert name twice across kinds", "version: 1\nlisten: {tcp: {address: ':1', cert: /c, key: /k, client_ca: /ca}}\ntenants:\n  - name: a\n    root: /a\n    credentials:\n      - {name: c, roles: [agent], client_cert: {common_name: x}}\n      - {name: d, roles: [auditor], client_cert: {san: x}}\n", []string{
			`f.yaml:8:9: credential "d": client certificate name "x" is already mapped at line 7; one identity maps to one credential`}},
		{"cert without client_ca", "version: 1\nlisten: {tcp: {address: ':1', cert: /c, key: /k}}\ntenants:\n  - name: a\n    root: /a\n    credentials:\n      - {name: c, roles: [agent], client_cert: {common_name: x}}\n", []string{
			`f.yaml:7:9: credential "c": a client certificate is verified against listen.tcp.client_ca, which is not set`}},
		{"cert without tcp", base + "  - name: a\n    root: /a\n    credentials:\n      - {name: c, roles: [agent], client_cert: {san: x}}\n", []string{
			`f.yaml:8:9: credential "c": a client certificate needs a TCP listener (listen.tcp)`}},
		{"no role", base + "  - name: a\n    root: /a\n    credentials:\n      - {name: c, uid: 5}\n", []string{
			`f.yaml:8:9: credential "c": no roles; want one or more of agent, approver, auditor`}},
		{"empty roles", base + "  - name: a\n    root: /a\n    credentials:\n      - {name: c, roles: [], uid: 5}\n", []string{
			`f.yaml:8:9: credential "c": no roles; want one or more of agent, approver, auditor`}},
		{"agent and approver", base + "  - name: a\n    root: /a\n    credentials:\n      - {name: c, roles: [agent, approver], uid: 5}\n", []string{
			`f.yaml:8:9: credential "c": both agent and approver; the credential an agent runs with must never approve its own gate, so give approval to a separate credential`}},
		{"unknown role", base + "  - name: a\n    root: /a\n    credentials:\n      - {name: c, roles: [admin], uid: 5}\n", []string{
			`f.yaml:8:27: roles: unknown role "admin" (known: agent, approver, auditor)`,
			`f.yaml:8:9: credential "c": no roles; want one or more of agent, approver, auditor`}},
		{"two kinds", base + "  - name: a\n    root: /a\n    credentials:\n      - {name: c, roles: [agent], uid: 5, token_sha256: " + hashA + "}\n", []string{
			`f.yaml:8:9: credential: want exactly one of token_sha256, client_cert and uid, got 2`}},
		{"bad hash", base + "  - name: a\n    root: /a\n    credentials:\n      - {name: c, roles: [agent], token_sha256: ABC}\n", []string{
			`f.yaml:8:49: token_sha256: want 64 lowercase hex digits (the line ` + "`cordon serve token`" + ` prints)`}},
		{"negative uid", base + "  - name: a\n    root: /a\n    credentials:\n      - {name: c, roles: [agent], uid: -1}\n", []string{
			`f.yaml:8:40: credential uid: -1 is out of range [0, 4294967294]`}},
		{"bad tenant name", base + "  - {name: ../x, root: /a}\n", []string{
			`f.yaml:5:12: tenant name: "../x": want lowercase letters, digits, '-' and '_', starting with a letter or digit, at most 63`}},
		{"alias", "version: 1\nlisten: &l {unix: {path: /s}}\ntenants: [{name: a, root: *l}]\n", []string{
			`f.yaml:3:27: tenant root: want a value, got an alias`}},
		{"two documents", "version: 1\n---\nversion: 1\n", []string{
			`f.yaml:2:1: one YAML document is allowed; found a second one`}},
		{"empty", "", []string{`f.yaml: empty file: want at least "version: 1", "listen" and "tenants"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("f.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatal("accepted; want refused")
			}
			got := strings.Split(err.Error(), "\n")
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got:\n%s\nwant:\n%s", err, strings.Join(tc.want, "\n"))
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Errorf("error is not a *config.Error: %T", err)
			}
		})
	}
}
