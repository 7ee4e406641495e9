package server

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/runner/outcap"
	"github.com/cordonhq/cordon/server/api"
	"github.com/cordonhq/cordon/session/wire"
)

func TestValidNames(t *testing.T) {
	for id, want := range map[string]bool{
		"20261129T201530Z-3fa9c1": true, "a": true,
		"": false, "..": false, "a/b": false, "a\x00b": false, "a.b": false, "a_b": false,
		strings.Repeat("a", 65): false,
	} {
		if got := validSessionID(id); got != want {
			t.Errorf("validSessionID(%q) = %v; want %v", id, got, want)
		}
	}
	for n, want := range map[string]bool{
		"ws": true, "my-ws_1.2": true, strings.Repeat("w", 63): true,
		"": false, ".": false, "..": false, ".hidden": false, "a/b": false, "a b": false, "a\x00": false,
		strings.Repeat("w", 64): false,
	} {
		if got := validWorkspaceName(n); got != want {
			t.Errorf("validWorkspaceName(%q) = %v; want %v", n, got, want)
		}
	}
}

// TestPinContract: the written contract's workspace is the request's and its limits
// the ones the session is charged, replacing the contract's own.
func TestPinContract(t *testing.T) {
	ws := t.TempDir()
	lim := contract.LimitsPlan{Memory: 3 << 30, Pids: 500, CPU: 1.5}
	for _, in := range []string{"version: 1\n", "version: 1\nfilesystem:\n  readable: [/usr]\n", "{version: 1}",
		"version: 1\nlimits: {memory: 1GiB, pids: 9000}\n", "version: 1\nlimits:\n"} {
		out, err := pinContract([]byte(in), ws, lim)
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		c, err := contract.Parse("x", out)
		if err != nil || c.Workspace.Value != ws {
			t.Fatalf("%q: got %q (workspace %q, %v); want workspace %s", in, out, c.Workspace.Value, err, ws)
		}
		p, err := contract.Compile(c, contract.Host{})
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if p.Limits.Memory != lim.Memory || p.Limits.Pids != lim.Pids || p.Limits.CPU != lim.CPU || len(p.Limits.Defaulted) != 0 {
			t.Errorf("%q: limits %+v; want %+v", in, p.Limits, lim)
		}
	}
	if out, err := pinContract([]byte("version: ["), ws, lim); err == nil {
		t.Errorf("got %q; want an error", out)
	}
}

func TestValidateExec(t *testing.T) {
	for _, req := range []api.ExecRequest{
		{}, {Argv: []string{""}}, {Argv: []string{"x"}, TimeoutMS: -1}, {Argv: []string{"x"}, Cap: -1},
		{Argv: []string{"x"}, Cap: wire.MaxCap + 1}, {Argv: []string{"x"}, Cap: 1 << 40},
		{Argv: []string{"x"}, TimeoutMS: 25 * 3600 * 1000}, {Argv: make([]string, maxArgv+1)},
	} {
		if validateExec(req) == nil {
			t.Errorf("%+v: accepted", req)
		}
	}
	if err := validateExec(api.ExecRequest{Argv: []string{"true"}, TimeoutMS: 1000, Cap: wire.MaxCap}); err != nil {
		t.Error(err)
	}
	// What the server lets through, the supervisor's output cap holds whole.
	if wire.MaxCap > outcap.MaxCap {
		t.Errorf("wire.MaxCap %d is above outcap.MaxCap %d", wire.MaxCap, outcap.MaxCap)
	}
}

// TestSessionIDsNeverReachTheFileSystem: a malformed id is 404 before any path is
// made of it, with the body of an id that does not exist.
func TestSessionIDsNeverReachTheFileSystem(t *testing.T) {
	s, tok := testServer(t)
	h := s.routes()
	for _, path := range []string{"/v1/sessions/..%2F..%2Fetc", "/v1/sessions/a%00b", "/v1/sessions/a.json", "/v1/sessions/20261129T201530Z-3fa9c1"} {
		for _, op := range []string{"GET ", "POST /stop", "POST /sweep"} {
			method, suffix, _ := strings.Cut(op, " ")
			r := httptest.NewRequest(method, path+suffix, nil)
			r.Header.Set("Authorization", "Bearer "+tok)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusNotFound || strings.TrimSpace(w.Body.String()) != `{"error":"no such session"}` {
				t.Errorf("%s %s%s: got %d %s; want 404 no such session", method, path, suffix, w.Code, w.Body)
			}
		}
	}
}

// TestStartPastTheCap: a start past the tenant's sessions quota is 429 with
// Retry-After and the quota named, at once (never queued), and nothing is made.
func TestStartPastTheCap(t *testing.T) {
	s, tok := testServer(t)
	s.cfg.Tenants[0].Root = filepath.Join(t.TempDir(), "acme")
	for range s.cfg.Tenants[0].Quotas.Sessions {
		if _, err := s.quota.Reserve("acme", leastSession); err != nil {
			t.Fatal(err)
		}
	}
	r := httptest.NewRequest("POST", "/v1/sessions", strings.NewReader(`{"workspace":"w"}`))
	r.Header.Set("Authorization", "Bearer "+tok)
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	s.routes().ServeHTTP(w, r)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" || !strings.Contains(w.Body.String(), `"quota":"sessions"`) {
		t.Errorf("got %d %s (Retry-After %q); want 429 with Retry-After and quota sessions", w.Code, w.Body, w.Header().Get("Retry-After"))
	}
	if _, err := os.Stat(s.cfg.Tenants[0].Root); err == nil {
		t.Error("a refused start made the tenant's root")
	}
	if m := scrape(t, s); !hasLine(m, `cordon_quota_refusals_total{quota="sessions",tenant="acme"} 1`) {
		t.Errorf("the refusal is not counted:\n%s", m)
	}
}

func TestExecTimeoutBounds(t *testing.T) {
	for _, tc := range []struct {
		asked, contract int64
		ok              bool
	}{
		{0, 2000, true}, {1500, 2000, true}, {2000, 2000, true},
		{2001, 2000, false}, {10000, 2000, false}, {1, 0, false}, {0, 0, true},
	} {
		if err := execTimeoutFits(tc.asked, tc.contract); (err == nil) != tc.ok {
			t.Errorf("timeout_ms %d under a contract's %d ms: got %v; want ok %v", tc.asked, tc.contract, err, tc.ok)
		}
	}
	// A timeout whose product in nanoseconds would overflow is refused, not wrapped
	// to a negative (expired) one.
	for _, ms := range []int64{18446740473710, 1 << 62, maxExecTimeout.Milliseconds() + 1, -1} {
		if err := validateExec(api.ExecRequest{Argv: []string{"true"}, TimeoutMS: ms}); err == nil {
			t.Errorf("timeout_ms %d: accepted", ms)
		}
	}
}
