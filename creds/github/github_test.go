package github_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/creds"
	"github.com/cordonhq/cordon/creds/github"
	"github.com/cordonhq/cordon/internal/event"
)

var t0 = time.Date(2030, 1, 2, 15, 4, 5, 0, time.UTC)

const (
	run   = "20300102T150405Z-abcdef"
	appID = "12345"
	inst  = 42
)

var (
	keyOnce sync.Once
	testKey *rsa.PrivateKey
)

func key(t *testing.T) *rsa.PrivateKey {
	keyOnce.Do(func() {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		testKey = k
	})
	return testKey
}

// fakeGitHub checks requests the way api.github.com does for the two endpoints the
// provider uses, and remembers which installation tokens are live.
type fakeGitHub struct {
	t   *testing.T
	pub *rsa.PublicKey
	now time.Time // GitHub's clock

	mu        sync.Mutex
	live      map[string]bool
	expiresIn time.Duration // of minted tokens; GitHub's is one hour
	widen     func(*tokenResponse)
	failMint  int // answer this status to mints
	requests  []string
}

type tokenResponse struct {
	Token               string              `json:"token"`
	ExpiresAt           string              `json:"expires_at"`
	Permissions         map[string]string   `json:"permissions"`
	RepositorySelection string              `json:"repository_selection"`
	Repositories        []map[string]string `json:"repositories,omitempty"`
}

func newFakeGitHub(t *testing.T) (*fakeGitHub, *httptest.Server) {
	f := &fakeGitHub{t: t, pub: &key(t).PublicKey, now: t0, live: map[string]bool{}, expiresIn: time.Hour}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

func (f *fakeGitHub) liveCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.live)
}

func fail(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"message":%q,"documentation_url":"https://docs.github.com/rest"}`, msg)
}

func (f *fakeGitHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, r.Method+" "+r.URL.Path)
	if r.Header.Get("User-Agent") == "" {
		fail(w, 403, "Request forbidden by administrative rules. Please make sure your request has a User-Agent header")
		return
	}
	if r.Header.Get("Accept") != "application/vnd.github+json" || r.Header.Get("X-GitHub-Api-Version") != "2022-11-28" {
		f.t.Errorf("%s %s: Accept %q, X-GitHub-Api-Version %q", r.Method, r.URL.Path, r.Header.Get("Accept"), r.Header.Get("X-GitHub-Api-Version"))
	}
	bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		fail(w, 401, "Requires authentication")
		return
	}
	switch {
	case r.Method == "POST" && r.URL.Path == fmt.Sprintf("/app/installations/%d/access_tokens", inst):
		if err := f.checkJWT(bearer); err != nil {
			fail(w, 401, "A JSON web token could not be decoded: "+err.Error())
			return
		}
		if r.Header.Get("Content-Type") != "application/json" {
			fail(w, 415, "Unsupported Media Type")
			return
		}
		var req struct {
			Repositories []string          `json:"repositories"`
			Permissions  map[string]string `json:"permissions"`
		}
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			fail(w, 422, "Invalid request: "+err.Error())
			return
		}
		if f.failMint != 0 {
			fail(w, f.failMint, "There is at least one repository that does not exist or is not accessible to the parent installation.")
			return
		}
		var tb [20]byte
		rand.Read(tb[:])
		resp := tokenResponse{
			Token:               "ghs_" + hex.EncodeToString(tb[:]),
			ExpiresAt:           f.now.Add(f.expiresIn).Format(time.RFC3339),
			Permissions:         maps.Clone(req.Permissions),
			RepositorySelection: "selected",
		}
		resp.Permissions["metadata"] = "read" // GitHub always adds it
		for _, repo := range req.Repositories {
			resp.Repositories = append(resp.Repositories, map[string]string{"name": repo, "full_name": "acme/" + repo})
		}
		if f.widen != nil {
			f.widen(&resp)
		}
		f.live[resp.Token] = true
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(201)
		json.NewEncoder(w).Encode(resp)
	case r.Method == "DELETE" && r.URL.Path == "/installation/token":
		if !f.live[bearer] {
			fail(w, 401, "Bad credentials")
			return
		}
		delete(f.live, bearer)
		w.WriteHeader(204)
	default:
		fail(w, 404, "Not Found")
	}
}

// checkJWT verifies the app JWT as GitHub does: RS256 with the app's public key, iss
// the app, iat not in the future, exp in the future and at most 10 minutes after iat.
func (f *fakeGitHub) checkJWT(tok string) error {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return errors.New("not three parts")
	}
	dec := base64.RawURLEncoding
	var header struct{ Alg, Typ string }
	var claims struct {
		Iat, Exp int64
		Iss      any
	}
	h, err1 := dec.DecodeString(parts[0])
	c, err2 := dec.DecodeString(parts[1])
	sig, err3 := dec.DecodeString(parts[2])
	if err := errors.Join(err1, err2, err3, json.Unmarshal(h, &header), json.Unmarshal(c, &claims)); err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(f.pub, crypto.SHA256, sum[:], sig); err != nil {
		return fmt.Errorf("signature: %w", err)
	}
	now := f.now.Unix()
	switch {
	case header.Alg != "RS256" || header.Typ != "JWT":
		return fmt.Errorf("header %+v", header)
	case fmt.Sprint(claims.Iss) != appID:
		return fmt.Errorf("iss %v", claims.Iss)
	case claims.Iat > now:
		return errors.New("'Issued at' claim ('iat') must be an Integer representing a time in the past")
	case claims.Exp <= now:
		return errors.New("'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires")
	case claims.Exp-claims.Iat > 600:
		return errors.New("'Expiration time' claim ('exp') is too far in the future")
	case claims.Iat != now-60:
		return fmt.Errorf("iat %d; want backdated 60 s from %d", claims.Iat, now)
	}
	return nil
}

func newProvider(t *testing.T, srv *httptest.Server) *github.Provider {
	t.Helper()
	p, err := github.New(github.Config{APIURL: srv.URL + "/", AppID: appID, InstallationID: inst, Key: key(t), HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var scope = map[string]any{
	"repositories": []any{"cordon", "website"},
	"permissions":  map[string]any{"contents": "read", "pull_requests": "write"},
}

func args(ttl time.Duration, sc map[string]any) creds.IssueArgs {
	return creds.IssueArgs{Run: run, Now: t0, Credential: contract.Credential{Name: "GH_TOKEN", Provider: "github-app", TTL: ttl, Scope: sc}}
}

func TestIssueAndRevoke(t *testing.T) {
	f, srv := newFakeGitHub(t)
	p := newProvider(t, srv)
	g, err := p.Issue(context.Background(), args(time.Hour, scope))
	if err != nil {
		t.Fatal(err)
	}
	tok := g.Secret.Reveal()
	if !strings.HasPrefix(tok, "ghs_") || f.liveCount() != 1 || !g.ExpiresAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("grant %+v", g)
	}
	if strings.Contains(g.RevokeRef, tok) || strings.Contains(g.RevokeRef, tok[4:]) {
		t.Fatal("the revoke reference holds the token in clear")
	}
	// Revoke as the broker does: from the ledger's record, without the value.
	g.Run, g.Name, g.Secret = run, "GH_TOKEN", creds.Secret{}
	if err := p.Revoke(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	if f.liveCount() != 0 {
		t.Error("token still live")
	}
	// Idempotent: GitHub answers 401 for a token already revoked.
	if err := p.Revoke(context.Background(), g); err != nil {
		t.Errorf("second revoke: %v", err)
	}
	if want := []string{"POST /app/installations/42/access_tokens", "DELETE /installation/token", "DELETE /installation/token"}; !slices.Equal(f.requests, want) {
		t.Errorf("requests %q; want %q", f.requests, want)
	}
}

func TestRevokeReferenceIsBound(t *testing.T) {
	f, srv := newFakeGitHub(t)
	p := newProvider(t, srv)
	g, err := p.Issue(context.Background(), args(time.Hour, scope))
	if err != nil {
		t.Fatal(err)
	}
	// Another record's name, or another app key, cannot open it.
	moved := creds.Grant{Run: run, Name: "OTHER", RevokeRef: g.RevokeRef}
	if err := p.Revoke(context.Background(), moved); err == nil {
		t.Error("a reference opened under another name")
	}
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	p2, _ := github.New(github.Config{APIURL: srv.URL, AppID: appID, InstallationID: inst, Key: other, HTTPClient: srv.Client()})
	if err := p2.Revoke(context.Background(), creds.Grant{Run: run, Name: "GH_TOKEN", RevokeRef: g.RevokeRef}); err == nil {
		t.Error("a reference opened under another app key")
	}
	if f.liveCount() != 1 {
		t.Error("a bad reference revoked something")
	}
	if err := p.Revoke(context.Background(), creds.Grant{Run: run, Name: "GH_TOKEN"}); !errors.Is(err, creds.ErrNoRevokeRef) {
		t.Errorf("no reference: %v", err)
	}
}

func TestWiderTokenIsRevoked(t *testing.T) {
	for name, widen := range map[string]func(*tokenResponse){
		"all repositories":  func(r *tokenResponse) { r.RepositorySelection = "all"; r.Repositories = nil },
		"extra repository":  func(r *tokenResponse) { r.Repositories = append(r.Repositories, map[string]string{"name": "secrets"}) },
		"higher permission": func(r *tokenResponse) { r.Permissions["contents"] = "write" },
		"extra permission":  func(r *tokenResponse) { r.Permissions["administration"] = "read" },
	} {
		t.Run(name, func(t *testing.T) {
			f, srv := newFakeGitHub(t)
			f.widen = widen
			_, err := newProvider(t, srv).Issue(context.Background(), args(time.Hour, scope))
			if err == nil || !strings.Contains(err.Error(), "wider") {
				t.Fatalf("err %v", err)
			}
			if f.liveCount() != 0 {
				t.Error("the wider token was not revoked")
			}
		})
	}
}

func TestIssueErrors(t *testing.T) {
	f, srv := newFakeGitHub(t)
	f.failMint = 422
	_, err := newProvider(t, srv).Issue(context.Background(), args(time.Hour, scope))
	if err == nil || !strings.Contains(err.Error(), "422") || !strings.Contains(err.Error(), "not accessible") {
		t.Errorf("err %v; want GitHub's status and message", err)
	}
	// The JWT is signed with the broker's clock: GitHub refuses it when that clock is
	// an hour fast.
	f.failMint = 0
	a := args(time.Hour, scope)
	a.Now = t0.Add(time.Hour)
	if _, err := newProvider(t, srv).Issue(context.Background(), a); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("skewed clock: %v", err)
	}
	for name, sc := range map[string]map[string]any{
		"no repositories":  {"permissions": map[string]any{"contents": "read"}},
		"no permissions":   {"repositories": []any{"cordon"}},
		"owner/repo":       {"repositories": []any{"acme/cordon"}, "permissions": map[string]any{"contents": "read"}},
		"bad level":        {"repositories": []any{"cordon"}, "permissions": map[string]any{"contents": "all"}},
		"unknown key":      {"repositories": []any{"cordon"}, "permissions": map[string]any{"contents": "read"}, "org": "acme"},
		"permissions list": {"repositories": []any{"cordon"}, "permissions": []any{"contents"}},
	} {
		if _, err := newProvider(t, srv).Issue(context.Background(), args(time.Hour, sc)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if len(f.requests) != 2 {
		t.Errorf("bad scopes reached GitHub: %q", f.requests)
	}
}

func TestConfigRequired(t *testing.T) {
	if _, err := github.New(github.Config{}); err == nil || !strings.Contains(err.Error(), "app id") || !strings.Contains(err.Error(), "installation") || !strings.Contains(err.Error(), "key") {
		t.Errorf("New(empty): %v", err)
	}
}

func TestParseKey(t *testing.T) {
	k := key(t)
	pkcs1 := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	pkcs8 := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	for name, data := range map[string][]byte{"pkcs1": pkcs1, "pkcs8": pkcs8} {
		got, err := github.ParseKey(data)
		if err != nil || !got.Equal(k) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := github.ParseKey([]byte("not a key")); err == nil {
		t.Error("garbage parsed")
	}
}

// Through the broker: GitHub's expiry (one hour) is earlier than the ttl asked for
// (two hours), and the grant, its event and the ledger record GitHub's. A broker that
// is dropped without revoking (kill -9) is settled by another's Reconcile, which
// opens the sealed token from the ledger and revokes it.
func TestBrokerRecordsGitHubsExpiryAndReconciles(t *testing.T) {
	f, srv := newFakeGitHub(t)
	f.expiresIn = time.Hour - 5*time.Minute
	root := filepath.Join(t.TempDir(), "ledger")
	var issued []string
	sink := event.SinkFunc(func(e event.Event) {
		if e.Type == event.CredIssue {
			data, _ := json.Marshal(e.Body)
			issued = append(issued, string(data))
		}
	})
	newBroker := func() *creds.Broker {
		b, err := creds.New(creds.Config{
			Root: root, Providers: map[string]creds.Provider{"github-app": newProvider(t, srv)},
			Redact: func(string, string) error { return nil }, Events: sink, Clock: func() time.Time { return t0 },
			Alerts: &bytes.Buffer{},
		})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := newBroker()
	gs, err := b.IssueAll(context.Background(), run, []contract.Credential{
		{Name: "GH_TOKEN", Provider: "github-app", TTL: 2 * time.Hour, Scope: scope},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := t0.Add(55 * time.Minute)
	if !gs[0].ExpiresAt.Equal(want) {
		t.Errorf("grant expires %v; want GitHub's %v", gs[0].ExpiresAt, want)
	}
	if len(issued) != 1 || !strings.Contains(issued[0], `"expires":"2030-01-02T15:59:05Z"`) || !strings.Contains(issued[0], `"ttl_s":7200`) {
		t.Errorf("cred.issue %v", issued)
	}
	ledger := readTree(t, root)
	if !strings.Contains(ledger, `"expires_at":"2030-01-02T15:59:05Z"`) || strings.Contains(ledger, gs[0].Secret.Reveal()) {
		t.Errorf("ledger:\n%s", ledger)
	}

	b = nil // kill -9
	gc := newBroker()
	out, err := gc.Reconcile(context.Background(), func(string) bool { return false })
	if err != nil || len(out) != 1 || out[0].Result != creds.Revoked {
		t.Fatalf("Reconcile: %+v, %v", out, err)
	}
	if f.liveCount() != 0 {
		t.Error("the installation token is still live")
	}
}

func readTree(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			data, _ := os.ReadFile(p)
			b.Write(data)
		}
		return nil
	})
	return b.String()
}
