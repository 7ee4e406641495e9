package auth

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"net/url"
	"testing"

	"github.com/cordonhq/cordon/server/config"
)

func testAuth(t *testing.T) (*Authenticator, string, string) {
	t.Helper()
	tokA, sumA := NewToken()
	tokB, sumB := NewToken()
	cfg, err := config.Parse("t.yaml", []byte(`version: 1
listen:
  unix: {path: /run/c.sock}
  tcp: {address: ":1", cert: /c, key: /k, client_ca: /ca}
tenants:
  - name: acme
    root: /srv/acme
    credentials:
      - {name: ci, roles: [agent], token_sha256: `+sumA+`}
      - {name: lead, roles: [approver], client_cert: {common_name: lead.acme}}
      - {name: bot, roles: [auditor], client_cert: {san: "spiffe://acme/bot"}}
      - {name: me, roles: [agent, auditor], uid: 1000}
  - name: beta
    root: /srv/beta
    credentials:
      - {name: ci, roles: [agent], token_sha256: `+sumB+`}
      - {name: ops, roles: [auditor], client_cert: {san: ops.beta}}
`))
	if err != nil {
		t.Fatal(err)
	}
	return New(cfg), tokA, tokB
}

func TestToken(t *testing.T) {
	a, tokA, tokB := testAuth(t)
	for _, tc := range []struct {
		name, tok, tenant string
		ok                bool
	}{
		{"acme's token", tokA, "acme", true},
		{"beta's token", tokB, "beta", true},
		{"the hash is not the token", "aaaa", "", false},
		{"empty", "", "", false},
		{"one character off", tokA[:len(tokA)-1] + "x", "", false},
		{"huge", string(make([]byte, MaxTokenLen+1)), "", false},
	} {
		id, ok := a.Token(tc.tok)
		if ok != tc.ok || id.Tenant != tc.tenant {
			t.Errorf("%s: got %+v %v; want tenant %q %v", tc.name, id, ok, tc.tenant, tc.ok)
		}
	}
}

func TestCert(t *testing.T) {
	a, _, _ := testAuth(t)
	spiffe, _ := url.Parse("spiffe://acme/bot")
	for _, tc := range []struct {
		name       string
		cert       *x509.Certificate
		credential string
		ok         bool
	}{
		{"by common name", &x509.Certificate{Subject: pkix.Name{CommonName: "lead.acme"}}, "lead", true},
		{"by URI SAN", &x509.Certificate{Subject: pkix.Name{CommonName: "x"}, URIs: []*url.URL{spiffe}}, "bot", true},
		{"by DNS SAN", &x509.Certificate{DNSNames: []string{"ops.beta"}}, "ops", true},
		{"unknown names", &x509.Certificate{Subject: pkix.Name{CommonName: "eve"}, DNSNames: []string{"eve.example"}}, "", false},
		{"names of two credentials", &x509.Certificate{Subject: pkix.Name{CommonName: "lead.acme"}, DNSNames: []string{"ops.beta"}}, "", false},
		{"SAN only as a SAN", &x509.Certificate{Subject: pkix.Name{CommonName: "lead.acme"}, DNSNames: []string{"lead.acme"}}, "lead", true},
		{"common name only as the common name", &x509.Certificate{Subject: pkix.Name{CommonName: "mallory"}, DNSNames: []string{"lead.acme"}}, "", false},
		{"SAN never as the common name", &x509.Certificate{Subject: pkix.Name{CommonName: "ops.beta"}}, "", false},
		{"URI SAN never as the common name", &x509.Certificate{Subject: pkix.Name{CommonName: "spiffe://acme/bot"}}, "", false},
		{"nil", nil, "", false},
	} {
		id, ok := a.Cert(tc.cert)
		if ok != tc.ok || id.Credential != tc.credential {
			t.Errorf("%s: got %+v %v; want credential %q %v", tc.name, id, ok, tc.credential, tc.ok)
		}
	}
}

func TestUID(t *testing.T) {
	a, _, _ := testAuth(t)
	if id, ok := a.UID(1000); !ok || id.Tenant != "acme" || !id.Roles.Has(config.RoleAuditor) {
		t.Errorf("uid 1000: got %+v %v", id, ok)
	}
	for _, uid := range []int{0, 65534, -1, 1 << 40} {
		if id, ok := a.UID(uid); ok {
			t.Errorf("uid %d: got %+v; want unmapped", uid, id)
		}
	}
}

func TestBearer(t *testing.T) {
	for h, want := range map[string]string{"Bearer abc": "abc", "bearer abc": "abc", "Basic abc": "", "Bearer ": "", "Bearerabc": "", "": ""} {
		if got, _ := Bearer(h); got != want {
			t.Errorf("Bearer(%q): got %q; want %q", h, got, want)
		}
	}
}

func TestNewToken(t *testing.T) {
	a, s1 := NewToken()
	b, s2 := NewToken()
	if a == b || s1 == s2 || len(a) != 43 || len(s1) != 64 {
		t.Errorf("tokens: %q %q sums %q %q", a, b, s1, s2)
	}
}
