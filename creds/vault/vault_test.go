package vault_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/creds"
	"github.com/cordonhq/cordon/creds/vault"
)

var t0 = time.Date(2030, 1, 2, 15, 4, 5, 0, time.UTC)

const (
	run    = "20300102T150405Z-abcdef"
	parent = "hvs.cordons-own-parent-token"
)

// fakeVault answers auth/token/create and auth/token/revoke-accessor as Vault does,
// for the parent token only, and remembers live child tokens by accessor.
type fakeVault struct {
	t *testing.T

	mu        sync.Mutex
	live      map[string]string // accessor → token
	lastBody  map[string]any
	lastPath  string
	namespace string
	tweak     func(auth map[string]any)
	requests  int
}

func newFakeVault(t *testing.T) (*fakeVault, *httptest.Server) {
	f := &fakeVault{t: t, live: map[string]string{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

func (f *fakeVault) liveCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.live)
}

func vaultErr(w http.ResponseWriter, code int, msgs ...string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]any{"errors": msgs})
}

func random() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (f *fakeVault) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests++
	f.namespace = r.Header.Get("X-Vault-Namespace")
	if r.Method != "POST" && r.Method != "PUT" {
		vaultErr(w, 405, "unsupported operation")
		return
	}
	tok := r.Header.Get("X-Vault-Token")
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		vaultErr(w, 400, "failed to parse JSON input: "+err.Error())
		return
	}
	switch {
	case r.URL.Path == "/v1/auth/token/revoke-self":
		for acc, t := range f.live {
			if t == tok {
				delete(f.live, acc)
				w.WriteHeader(204)
				return
			}
		}
		vaultErr(w, 403, "permission denied")
		return
	case tok != parent:
		vaultErr(w, 403, "permission denied")
		return
	}
	switch {
	case r.URL.Path == "/v1/auth/token/create" || strings.HasPrefix(r.URL.Path, "/v1/auth/token/create/"):
		f.lastBody, f.lastPath = body, r.URL.Path
		ttl, err := time.ParseDuration(fmt.Sprint(body["ttl"]))
		if err != nil {
			vaultErr(w, 400, "invalid ttl")
			return
		}
		var policies []string
		for _, p := range body["policies"].([]any) {
			policies = append(policies, p.(string))
		}
		if body["no_default_policy"] != true {
			policies = append(policies, "default")
		}
		slices.Sort(policies)
		acc, child := random(), "hvs."+random()
		auth := map[string]any{
			"client_token": child, "accessor": acc, "policies": policies, "token_policies": policies,
			"lease_duration": int(ttl.Seconds()), "renewable": body["renewable"], "orphan": false,
			"metadata": body["meta"], "entity_id": "", "token_type": "service",
		}
		if f.tweak != nil {
			f.tweak(auth)
		}
		f.live[acc] = child
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"request_id": random(), "lease_id": "", "renewable": false, "lease_duration": 0, "data": nil, "auth": auth})
	case r.URL.Path == "/v1/auth/token/revoke-accessor":
		acc, _ := body["accessor"].(string)
		if acc == "" {
			vaultErr(w, 400, "missing accessor")
			return
		}
		if _, ok := f.live[acc]; !ok {
			vaultErr(w, 400, "invalid accessor")
			return
		}
		delete(f.live, acc)
		w.WriteHeader(204)
	default:
		vaultErr(w, 404)
	}
}

func newProvider(t *testing.T, srv *httptest.Server, token string) *vault.Provider {
	t.Helper()
	p, err := vault.New(vault.Config{Addr: srv.URL, Token: creds.NewSecret(token), Namespace: "team-a", HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func args(ttl time.Duration, sc map[string]any) creds.IssueArgs {
	return creds.IssueArgs{Run: run, Now: t0, Credential: contract.Credential{Name: "VAULT_CI", Provider: "vault", TTL: ttl, Scope: sc}}
}

func TestIssueAndRevoke(t *testing.T) {
	f, srv := newFakeVault(t)
	p := newProvider(t, srv, parent)
	g, err := p.Issue(context.Background(), args(10*time.Minute, map[string]any{"policies": []any{"ci-read"}, "num_uses": 5}))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(g.Secret.Reveal(), "hvs.") || g.RevokeRef == "" || !g.ExpiresAt.Equal(t0.Add(10*time.Minute)) || f.liveCount() != 1 {
		t.Fatalf("grant %+v", g)
	}
	if f.namespace != "team-a" || f.lastPath != "/v1/auth/token/create" {
		t.Errorf("namespace %q, path %q", f.namespace, f.lastPath)
	}
	want := map[string]any{
		"policies": []any{"ci-read"}, "ttl": "600s", "explicit_max_ttl": "600s", "renewable": false,
		"no_default_policy": true, "display_name": "cordon-VAULT_CI", "num_uses": float64(5), "type": "service",
		"meta": map[string]any{"cordon_run": run, "cordon_credential": "VAULT_CI"},
	}
	if got, _ := json.Marshal(f.lastBody); string(got) != mustJSON(want) {
		t.Errorf("create body %s; want %s", got, mustJSON(want))
	}
	if err := p.Revoke(context.Background(), creds.Grant{Run: run, Name: "VAULT_CI", RevokeRef: g.RevokeRef}); err != nil {
		t.Fatal(err)
	}
	if f.liveCount() != 0 {
		t.Error("child token still live")
	}
	// Vault no longer knows the accessor: already revoked, not an error.
	if err := p.Revoke(context.Background(), creds.Grant{RevokeRef: g.RevokeRef}); err != nil {
		t.Errorf("second revoke: %v", err)
	}
	if err := p.Revoke(context.Background(), creds.Grant{}); !errors.Is(err, creds.ErrNoRevokeRef) {
		t.Errorf("no reference: %v", err)
	}
}

func mustJSON(v any) string {
	data, _ := json.Marshal(v)
	return string(data)
}

func TestRoleAndDefaultPolicy(t *testing.T) {
	f, srv := newFakeVault(t)
	p := newProvider(t, srv, parent)
	if _, err := p.Issue(context.Background(), args(time.Minute, map[string]any{"policies": []any{"ci", "default"}, "role": "ci-role"})); err != nil {
		t.Fatal(err)
	}
	if f.lastPath != "/v1/auth/token/create/ci-role" || f.lastBody["no_default_policy"] != false {
		t.Errorf("path %s, body %v", f.lastPath, f.lastBody)
	}
}

func TestOtherTokenIsRevoked(t *testing.T) {
	for name, tweak := range map[string]func(map[string]any){
		"extra policy":  func(a map[string]any) { a["token_policies"] = []any{"ci-read", "admin"} },
		"longer lease":  func(a map[string]any) { a["lease_duration"] = 7200 },
		"never expires": func(a map[string]any) { a["lease_duration"] = 0 },
		"no accessor":   func(a map[string]any) { a["accessor"] = "" },
	} {
		t.Run(name, func(t *testing.T) {
			f, srv := newFakeVault(t)
			f.tweak = tweak
			_, err := newProvider(t, srv, parent).Issue(context.Background(), args(10*time.Minute, map[string]any{"policies": []any{"ci-read"}}))
			if err == nil || !strings.Contains(err.Error(), "other than asked") {
				t.Fatalf("err %v", err)
			}
			if f.liveCount() != 0 {
				t.Error("the token was not revoked")
			}
		})
	}
}

func TestIssueErrors(t *testing.T) {
	f, srv := newFakeVault(t)
	_, err := newProvider(t, srv, "hvs.wrong").Issue(context.Background(), args(time.Minute, map[string]any{"policies": []any{"ci"}}))
	if err == nil || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("wrong parent: %v", err)
	}
	p := newProvider(t, srv, parent)
	for name, sc := range map[string]map[string]any{
		"no policies": {},
		"root":        {"policies": []any{"root"}},
		"bad role":    {"policies": []any{"ci"}, "role": "../sys"},
		"negative":    {"policies": []any{"ci"}, "num_uses": -1},
		"unknown key": {"policies": []any{"ci"}, "period": "1h"},
	} {
		if _, err := p.Issue(context.Background(), args(time.Minute, sc)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if f.requests != 1 {
		t.Errorf("%d requests reached Vault; bad scopes must not", f.requests)
	}
}

func TestConfig(t *testing.T) {
	for name, cfg := range map[string]vault.Config{
		"no addr":  {Token: creds.NewSecret("x")},
		"bad addr": {Addr: "vault:8200", Token: creds.NewSecret("x")},
		"no token": {Addr: "https://vault:8200"},
	} {
		if _, err := vault.New(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// The parent token never appears in an error.
func TestErrorsHoldNoToken(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		vaultErr(w, 500, "internal error for token "+strconv.Quote("[hidden]"))
	}))
	defer srv.Close()
	p := newProvider(t, srv, parent)
	_, err := p.Issue(context.Background(), args(time.Minute, map[string]any{"policies": []any{"ci"}}))
	if err == nil || strings.Contains(err.Error(), parent) {
		t.Errorf("err %v", err)
	}
}
