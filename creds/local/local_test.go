package local_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/creds"
	"github.com/cordonhq/cordon/creds/local"
)

var t0 = time.Date(2030, 1, 2, 15, 4, 5, 0, time.UTC)

const run = "20300102T150405Z-abcdef"

func issue(t *testing.T, p *local.Provider, name string, ttl time.Duration, scopes ...any) creds.Grant {
	t.Helper()
	g, err := p.Issue(context.Background(), creds.IssueArgs{
		Run: run, Now: t0,
		Credential: contract.Credential{Name: name, Provider: "local", TTL: ttl, Scope: map[string]any{"scopes": scopes}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestIssueVerifyRevoke(t *testing.T) {
	root := t.TempDir()
	p, err := local.New(root)
	if err != nil {
		t.Fatal(err)
	}
	g := issue(t, p, "SVC_TOKEN", 10*time.Minute, "read:artifacts", "write:cache")
	tok := g.Secret.Reveal()
	if !strings.HasPrefix(tok, local.TokenPrefix) || len(tok) != len(local.TokenPrefix)+72 {
		t.Errorf("token %d bytes, want the prefix and 72 hex digits", len(tok))
	}
	if !g.ExpiresAt.Equal(t0.Add(10*time.Minute)) || g.ID != creds.Fingerprint(tok) || g.RevokeRef == "" {
		t.Errorf("grant %+v", g)
	}
	// Only the hash is stored, in a 0600 file.
	entries, _ := filepath.Glob(filepath.Join(root, "local", "*.json"))
	if len(entries) != 1 {
		t.Fatalf("store holds %v", entries)
	}
	data, _ := os.ReadFile(entries[0])
	st, _ := os.Stat(entries[0])
	if strings.Contains(string(data), tok) || strings.Contains(string(data), tok[len(local.TokenPrefix):]) || st.Mode().Perm() != 0o600 {
		t.Errorf("store entry (mode %v) holds the token: %s", st.Mode(), data)
	}

	info, err := local.Verify(root, tok, []string{"read:artifacts"}, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if info.Run != run || info.Name != "SVC_TOKEN" || info.ID != g.ID || len(info.Scopes) != 2 || !info.ExpiresAt.Equal(g.ExpiresAt) {
		t.Errorf("info %+v", info)
	}
	if _, err := local.Verify(root, tok, []string{"admin"}, t0.Add(time.Minute)); !errors.Is(err, local.ErrInactive) || !strings.Contains(err.Error(), "missing scope") {
		t.Errorf("scope not held: %v", err)
	}

	if err := p.Revoke(context.Background(), creds.Grant{Run: run, Name: "SVC_TOKEN", RevokeRef: g.RevokeRef}); err != nil {
		t.Fatal(err)
	}
	if _, err := local.Verify(root, tok, nil, t0.Add(time.Minute)); !errors.Is(err, local.ErrInactive) {
		t.Errorf("revoked token verifies: %v", err)
	}
	// Idempotent.
	if err := p.Revoke(context.Background(), creds.Grant{Run: run, Name: "SVC_TOKEN", RevokeRef: g.RevokeRef}); err != nil {
		t.Errorf("second revoke: %v", err)
	}
}

// Near expiry, with the clock injected: active one second before, inactive at and
// one second after.
func TestVerifyNearExpiry(t *testing.T) {
	root := t.TempDir()
	p, _ := local.New(root)
	g := issue(t, p, "T", time.Hour, "s")
	exp := g.ExpiresAt
	for _, tc := range []struct {
		at     time.Time
		active bool
	}{
		{exp.Add(-time.Second), true},
		{exp, false},
		{exp.Add(time.Second), false},
	} {
		_, err := local.Verify(root, g.Secret.Reveal(), nil, tc.at)
		if (err == nil) != tc.active {
			t.Errorf("at exp%+v: err %v; want active %v", tc.at.Sub(exp), err, tc.active)
		}
		if err != nil && (!errors.Is(err, local.ErrInactive) || !strings.Contains(err.Error(), "expired")) {
			t.Errorf("at exp%+v: %v", tc.at.Sub(exp), err)
		}
	}
}

func TestVerifyRejectsMalformed(t *testing.T) {
	root := t.TempDir()
	p, _ := local.New(root)
	tok := issue(t, p, "T", time.Hour, "s").Secret.Reveal()
	flip := []byte(tok)
	flip[20] ^= 1 // still hex? make it a different digit either way
	if flip[20] < '0' || (flip[20] > '9' && flip[20] < 'a') || flip[20] > 'f' {
		flip[20] = '0'
	}
	for name, bad := range map[string]string{
		"empty": "", "prefix only": local.TokenPrefix, "truncated": tok[:len(tok)-1], "one digit changed": string(flip),
		"upper case": strings.ToUpper(tok), "other prefix": "cordom_" + tok[7:], "trailing newline": tok + "\n",
	} {
		_, err := local.Verify(root, bad, nil, t0)
		if !errors.Is(err, local.ErrInactive) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestScopeRefusals(t *testing.T) {
	p, _ := local.New(t.TempDir())
	for name, sc := range map[string]map[string]any{
		"no scopes":    {},
		"empty list":   {"scopes": []any{}},
		"not strings":  {"scopes": []any{1}},
		"space inside": {"scopes": []any{"a b"}},
		"unknown key":  {"scopes": []any{"a"}, "audience": "x"},
	} {
		_, err := p.Issue(context.Background(), creds.IssueArgs{Run: run, Now: t0, Credential: contract.Credential{Name: "T", TTL: time.Hour, Scope: sc}})
		if err == nil {
			t.Errorf("%s: issued", name)
		}
	}
}

func TestRevokeWithoutReferenceAndSweep(t *testing.T) {
	root := t.TempDir()
	p, _ := local.New(root)
	a := issue(t, p, "A", time.Hour, "s")
	b := issue(t, p, "B", 2*time.Hour, "s")
	// What the broker does for a grant whose record stayed pending: by run and name.
	if err := p.Revoke(context.Background(), creds.Grant{Run: run, Name: "A"}); err != nil {
		t.Fatal(err)
	}
	if _, err := local.Verify(root, a.Secret.Reveal(), nil, t0); !errors.Is(err, local.ErrInactive) {
		t.Error("A still verifies")
	}
	if _, err := local.Verify(root, b.Secret.Reveal(), nil, t0); err != nil {
		t.Errorf("B was revoked too: %v", err)
	}
	if err := p.Sweep(t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if entries, _ := filepath.Glob(filepath.Join(root, "local", "*.json")); len(entries) != 1 {
		t.Errorf("sweep before B's expiry left %v", entries)
	}
	p.Sweep(t0.Add(2 * time.Hour))
	if entries, _ := filepath.Glob(filepath.Join(root, "local", "*.json")); len(entries) != 0 {
		t.Errorf("sweep after B's expiry left %v", entries)
	}
}

func introspect(t *testing.T, srv *httptest.Server, method, ctype, body, query string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+"/introspect"+query, strings.NewReader(body))
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q", cc)
	}
	return resp.StatusCode, strings.TrimSpace(string(data))
}

func TestIntrospection(t *testing.T) {
	root := t.TempDir()
	p, _ := local.New(root)
	clock := t0.Add(time.Minute)
	mux := http.NewServeMux()
	mux.Handle("/introspect", local.NewHandler(local.HandlerConfig{Root: root, Clock: func() time.Time { return clock }}))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	live := issue(t, p, "SVC", time.Hour, "read", "write")
	revoked := issue(t, p, "GONE", time.Hour, "read")
	p.Revoke(context.Background(), creds.Grant{RevokeRef: revoked.RevokeRef})
	expiring := issue(t, p, "OLD", time.Minute, "read")
	form := "application/x-www-form-urlencoded"

	code, body := introspect(t, srv, "POST", form, url.Values{"token": {live.Secret.Reveal()}, "token_type_hint": {"access_token"}}.Encode(), "")
	var got local.Introspection
	if err := json.Unmarshal([]byte(body), &got); code != 200 || err != nil {
		t.Fatalf("%d %s", code, body)
	}
	want := local.Introspection{Active: true, Scope: "read write", ExpiresAt: t0.Add(time.Hour).Unix(), IssuedAt: t0.Unix(), Subject: run, TokenID: live.ID, Name: "SVC"}
	if got != want {
		t.Errorf("got %+v; want %+v", got, want)
	}

	// Inactive, whatever the reason: the same answer, byte for byte.
	for name, tok := range map[string]string{
		"revoked": revoked.Secret.Reveal(), "expired": expiring.Secret.Reveal(),
		"unknown": local.TokenPrefix + strings.Repeat("0", 72), "garbage": "hello",
	} {
		code, body := introspect(t, srv, "POST", form, "token="+url.QueryEscape(tok), "")
		if code != 200 || body != `{"active":false}` {
			t.Errorf("%s: %d %s", name, code, body)
		}
	}

	for name, tc := range map[string]struct {
		method, ctype, body, query string
		code                       int
	}{
		"GET":             {"GET", "", "", "", 405},
		"JSON body":       {"POST", "application/json", `{"token":"x"}`, "", 415},
		"no token":        {"POST", form, "foo=bar", "", 400},
		"token in URL":    {"POST", form, "token=x", "?token=" + url.QueryEscape(live.Secret.Reveal()), 400},
		"oversized body":  {"POST", form, "token=" + strings.Repeat("a", 20000), "", 400},
		"charset allowed": {"POST", form + "; charset=utf-8", "token=x", "", 200},
	} {
		code, body := introspect(t, srv, tc.method, tc.ctype, tc.body, tc.query)
		if code != tc.code || strings.Contains(body, live.Secret.Reveal()) {
			t.Errorf("%s: %d %s; want %d", name, code, body, tc.code)
		}
	}
}

// FuzzVerify: whatever a caller of the introspection endpoint sends, Verify neither
// panics nor finds active a token that was not issued.
func FuzzVerify(f *testing.F) {
	root := f.TempDir()
	p, _ := local.New(root)
	g, err := p.Issue(context.Background(), creds.IssueArgs{Run: run, Now: t0,
		Credential: contract.Credential{Name: "T", TTL: time.Hour, Scope: map[string]any{"scopes": []any{"s"}}}})
	if err != nil {
		f.Fatal(err)
	}
	issued := g.Secret.Reveal()
	for _, s := range []string{"", issued, issued[:40], local.TokenPrefix + strings.Repeat("f", 72), "../../etc/passwd", issued + "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		_, err := local.Verify(root, tok, nil, t0)
		if (err == nil) != (tok == issued) {
			t.Errorf("Verify(%q): %v", tok, err)
		}
	})
}
