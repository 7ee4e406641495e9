package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/gate"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/server/api"
	"github.com/cordonhq/cordon/server/auth"
	"github.com/cordonhq/cordon/server/config"
)

// tenants is a server of two tenants with their roots under a temporary directory:
// acme (ci: agent, lead: approver, audit: auditor) and beta (lead: approver and
// auditor). Tokens are by "tenant/credential".
type tenants struct {
	s          *Server
	h          http.Handler
	acme, beta config.Tenant
	tok        map[string]string
}

func newTenants(t *testing.T) *tenants {
	t.Helper()
	dir := t.TempDir()
	f := &tenants{tok: map[string]string{}}
	sum := func(who string) string {
		tok, sum := auth.NewToken()
		f.tok[who] = tok
		return sum
	}
	cfg, err := config.Parse("t.yaml", []byte(`version: 1
listen: {unix: {path: /run/c.sock}}
tenants:
  - name: acme
    root: `+filepath.Join(dir, "acme")+`
    credentials:
      - {name: ci, roles: [agent], token_sha256: `+sum("acme/ci")+`}
      - {name: lead, roles: [approver], token_sha256: `+sum("acme/lead")+`}
      - {name: audit, roles: [auditor], token_sha256: `+sum("acme/audit")+`}
  - name: beta
    root: `+filepath.Join(dir, "beta")+`
    credentials:
      - {name: lead, roles: [approver, auditor], token_sha256: `+sum("beta/lead")+`}
`))
	if err != nil {
		t.Fatal(err)
	}
	f.s, err = New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	f.h, f.acme, f.beta = f.s.routes(), cfg.Tenants[0], cfg.Tenants[1]
	return f
}

// do sends one request as who ("tenant/credential") and returns the status and body.
func (f *tenants) do(t *testing.T, method, path, who, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, path, rd)
	r.Header.Set("Authorization", "Bearer "+f.tok[who])
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	return w.Code, strings.TrimSpace(w.Body.String())
}

// gateRun serves a gate Service for run id on its admin socket in the run root, as the
// runner does.
func gateRun(t *testing.T, runRoot, id string) *gate.Service {
	t.Helper()
	if err := os.MkdirAll(paths.Root(runRoot).Gates(), 0o700); err != nil {
		t.Fatal(err)
	}
	g := contract.Gate{Name: "hello", Run: []string{"echo", "hi"}, Approve: contract.ApproveHuman, Why: "say hi", Timeout: contract.Duration(time.Minute)}
	s := gate.New(gate.Config{RunID: id, Workspace: t.TempDir(), Gates: []contract.Gate{g}})
	ln, err := net.Listen("unix", paths.Root(runRoot).GateSocket(id))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gate.ServeAdmin(ctx, ln, s) }()
	t.Cleanup(func() {
		s.Close()
		cancel()
		<-done
	})
	return s
}

// ask files a request for gate hello and returns it once pending, with the channel
// its outcome comes on.
func ask(t *testing.T, s *gate.Service) (gate.Pending, <-chan gate.Outcome) {
	t.Helper()
	before := len(s.List())
	res := make(chan gate.Outcome, 1)
	go func() {
		out, _ := s.Request(context.Background(), "hello", "")
		res <- out
	}()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if ps := s.List(); len(ps) > before {
			return ps[len(ps)-1], res
		}
	}
	t.Fatal("the request never showed")
	return gate.Pending{}, nil
}

func outcome(t *testing.T, res <-chan gate.Outcome) gate.Outcome {
	t.Helper()
	select {
	case o := <-res:
		return o
	case <-time.After(30 * time.Second):
		t.Fatal("no outcome after 30s")
		return gate.Outcome{}
	}
}

// TestGatesOfTheTenant: an approver lists, shows, approves and denies its tenant's
// requests, recorded as tenant/credential; another tenant's approver finds none of
// them (404, as for an id nobody has); an agent or an auditor is 403 and the request
// stays pending.
func TestGatesOfTheTenant(t *testing.T) {
	f := newTenants(t)
	svc := gateRun(t, f.acme.RunRoot(), "20261129T201530Z-3fa9c1")
	p, res := ask(t, svc)

	code, body := f.do(t, "GET", "/v1/gates", "acme/lead", "")
	var ls api.GateList
	if err := json.Unmarshal([]byte(body), &ls); code != 200 || err != nil || ls.Schema != gate.SchemaLs || len(ls.Pending) != 1 || ls.Pending[0].ID != p.ID {
		t.Fatalf("acme's approver lists: %d %s; want its one request %s", code, body, p.ID)
	}
	if code, body := f.do(t, "GET", "/v1/gates/"+p.ID, "acme/lead", ""); code != 200 || !strings.Contains(body, `"argv":["echo","hi"]`) {
		t.Errorf("acme's approver shows: %d %s", code, body)
	}

	if code, body := f.do(t, "GET", "/v1/gates", "beta/lead", ""); code != 200 || !strings.Contains(body, `"pending":[]`) {
		t.Errorf("beta's approver lists: %d %s; want none", code, body)
	}
	for _, rt := range []struct{ method, path, body string }{
		{"GET", "/v1/gates/%s", ""},
		{"POST", "/v1/gates/%s/approve", ""},
		{"POST", "/v1/gates/%s/deny", `{"why":"mine now"}`},
	} {
		code, body := f.do(t, rt.method, strings.Replace(rt.path, "%s", p.ID, 1), "beta/lead", rt.body)
		mcode, mbody := f.do(t, rt.method, strings.Replace(rt.path, "%s", "0badc0de", 1), "beta/lead", rt.body)
		want := `{"error":"no pending gate request ` + p.ID + `"}`
		if code != 404 || body != want || mcode != 404 || mbody != strings.Replace(want, p.ID, "0badc0de", 1) {
			t.Errorf("beta %s %s: %d %s (missing id: %d %s); want 404 as for a missing id", rt.method, rt.path, code, body, mcode, mbody)
		}
	}
	for _, who := range []string{"acme/ci", "acme/audit"} {
		if code, _ := f.do(t, "POST", "/v1/gates/"+p.ID+"/approve", who, ""); code != 403 {
			t.Errorf("%s approves: %d; want 403", who, code)
		}
	}
	if ps := svc.List(); len(ps) != 1 || ps[0].ID != p.ID {
		t.Fatalf("after refused approvals: pending %v; want %s still", ps, p.ID)
	}

	code, body = f.do(t, "POST", "/v1/gates/"+p.ID+"/approve", "acme/lead", "")
	if want := `{"id":"` + p.ID + `","decision":"approved","by":"acme/lead"}`; code != 200 || body != want {
		t.Errorf("approve: %d %s; want %s", code, body, want)
	}
	if o := outcome(t, res); !o.Approved || o.By != "acme/lead" || o.Output != "hi\n" {
		t.Errorf("approved outcome %+v; want by acme/lead with the output", o)
	}
	if code, _ := f.do(t, "POST", "/v1/gates/"+p.ID+"/approve", "acme/lead", ""); code != 404 {
		t.Errorf("approving twice: %d; want 404", code)
	}

	p, res = ask(t, svc)
	if code, _ := f.do(t, "POST", "/v1/gates/"+p.ID+"/deny", "acme/lead", `{"why":"`+strings.Repeat("x", api.MaxWhy+1)+`"}`); code != 400 {
		t.Errorf("deny with a reason past %d bytes: %d; want 400", api.MaxWhy, code)
	}
	if code, body := f.do(t, "POST", "/v1/gates/"+p.ID+"/deny", "acme/lead", `{"why":"not today"}`); code != 200 || !strings.Contains(body, `"decision":"denied"`) {
		t.Errorf("deny: %d %s", code, body)
	}
	if o := outcome(t, res); o.Approved || o.By != "acme/lead" || o.Why != "not today" {
		t.Errorf("denied outcome %+v; want the reason, by acme/lead", o)
	}
}

// TestIDsValidated: a gate or run id that no request or run can have is refused
// before it names anything (400); one with a '/' or a dot segment never reaches it.
func TestIDsValidated(t *testing.T) {
	f := newTenants(t)
	for _, id := range []string{"a.b", "..a", "%2E%2E", "a%2Fb", "a%00", "a%20b", "%C3%A9", strings.Repeat("a", 65)} {
		for _, rt := range []struct{ method, path, who string }{
			{"GET", "/v1/gates/", "acme/lead"},
			{"POST", "/v1/gates/%/approve", "acme/lead"},
			{"GET", "/v1/runs/", "acme/audit"},
			{"GET", "/v1/runs/%/verify", "acme/audit"},
			{"GET", "/v1/runs/%/export", "acme/audit"},
			{"GET", "/v1/runs/%/follow", "acme/audit"},
		} {
			path := rt.path + id
			if strings.Contains(rt.path, "%") {
				path = strings.Replace(rt.path, "%", id, 1)
			}
			if code, body := f.do(t, rt.method, path, rt.who, ""); code != 400 || !strings.Contains(body, "invalid") {
				t.Errorf("%s %s: %d %s; want 400", rt.method, path, code, body)
			}
		}
	}
	// The router answers these itself: a redirect to the cleaned path, or 404.
	for _, path := range []string{"/v1/gates/a/b", "/v1/runs/..", "/v1/runs/.", "/v1/runs/%2F", "/v1/runs/a/b/verify"} {
		if code, _ := f.do(t, "GET", path, "acme/audit", ""); code != 404 && code != 307 {
			t.Errorf("GET %s: %d; want it not routed", path, code)
		}
	}
}
