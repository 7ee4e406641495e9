package integration

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/gate/wire"
)

// tenantRoot is the root startServe gave tenant name.
func (s *served) tenantRoot(name string) string {
	return filepath.Join(filepath.Dir(filepath.Dir(s.sock)), name)
}

// tenantWorld is a world whose cordon keeps its state where the server looks for
// tenant's: CORDON_RUN_ROOT its run root, and --audit-dir its audit root (given to the
// session). The sessions API is not served yet, so the run is started with the binary.
func tenantWorld(t *testing.T, s *served, tenant string) (*world, string) {
	t.Helper()
	w := newWorld(t)
	root := s.tenantRoot(tenant)
	w.useRunRoot(filepath.Join(root, "run"))
	return w, filepath.Join(root, "audit")
}

// apiCall is one request through the server's TCP listener.
type apiCall struct {
	base string
	c    *http.Client
	tok  string
}

func (a apiCall) do(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	var hdr []string
	var rd io.Reader
	if body != "" {
		hdr, rd = []string{"Content-Type", "application/json"}, strings.NewReader(body)
	}
	code, b, _ := do(t, a.c, method, a.base+path, a.tok, rd, hdr...)
	return code, b
}

// pendingOf waits for the tenant's pending requests of run id to number n, through the
// API, and returns them.
func pendingOf(t *testing.T, a apiCall, id string, n int) []wire.Pending {
	t.Helper()
	var mine []wire.Pending
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		code, body := a.do(t, "GET", "/v1/gates", "")
		var ls struct {
			Schema  string         `json:"schema"`
			Pending []wire.Pending `json:"pending"`
		}
		if err := json.Unmarshal([]byte(body), &ls); code != 200 || err != nil || ls.Schema != "cordon.gate.ls/v1" {
			t.Fatalf("GET /v1/gates: %d %s", code, body)
		}
		mine = mine[:0]
		for _, p := range ls.Pending {
			if p.Run == id {
				mine = append(mine, p)
			}
		}
		if len(mine) == n {
			return mine
		}
	}
	t.Fatalf("GET /v1/gates: %d pending requests of %s after 30s; want %d", len(mine), id, n)
	return nil
}

const serveGateContract = `version: 1
gates:
  - {name: hello, run: ["echo", "hi from the host"], why: say hi}
`

// TestServeGatesAndAudit: a session of tenant acme, started with the binary in acme's
// roots, asks for a gate; acme's approver lists, shows and approves it through the
// API and the requester gets the operation's output; a second request is denied and
// the requester gets the reason; an agent's credential is 403 and the request stays
// pending; acme's auditor lists, shows, verifies and exports the run, which records
// the approver as acme/lead; beta's approver and auditor get 404 for every one of
// acme's ids, as for ids that do not exist.
func TestServeGatesAndAudit(t *testing.T) {
	s := startServe(t)
	w, auditDir := tenantWorld(t, s, "acme")
	w.contract(serveGateContract)
	id := w.startSession("--gates", "ask", "--audit-dir", auditDir)
	base := "https://" + s.addr
	leadCert, _, _ := s.ca.issue(t, "lead.acme", false)
	betaCert, _, _ := s.ca.issue(t, "lead.beta", false)
	lead := apiCall{base: base, c: s.client(leadCert)}
	agent := apiCall{base: base, c: s.client(), tok: s.tokens["acme"]}
	beta := apiCall{base: base, c: s.client(betaCert)}

	req := w.background("exec", id, "--", "cordon", "gate", "hello")
	p := pendingOf(t, lead, id, 1)[0]
	if p.Gate != "hello" {
		t.Errorf("pending request %+v; want gate hello", p)
	}
	if code, body := lead.do(t, "GET", "/v1/gates/"+p.ID, ""); code != 200 || !strings.Contains(body, `"schema":"cordon.gate.show/v1"`) || !strings.Contains(body, "hi from the host") {
		t.Errorf("GET /v1/gates/{id}: %d %s", code, body)
	}

	t.Run("an agent cannot approve: 403, still pending", func(t *testing.T) {
		for _, verb := range []string{"approve", "deny"} {
			if code, body := agent.do(t, "POST", "/v1/gates/"+p.ID+"/"+verb, `{}`); code != 403 {
				t.Errorf("agent %s: %d %s; want 403", verb, code, body)
			}
		}
		if ps := pendingOf(t, lead, id, 1); ps[0].ID != p.ID {
			t.Errorf("after the agent's attempts: %+v; want %s still pending", ps, p.ID)
		}
	})
	t.Run("another tenant's approver: 404 as for a missing id", func(t *testing.T) {
		crossGates(t, beta, p.ID)
	})

	if code, body := lead.do(t, "POST", "/v1/gates/"+p.ID+"/approve", ""); code != 200 || !strings.Contains(body, `"by":"acme/lead"`) {
		t.Fatalf("approve: %d %s", code, body)
	}
	if r := req.wait(t); r.code != 0 || !strings.Contains(r.stdout, "hi from the host") {
		t.Errorf("the approved requester: %v; want exit 0 and the operation's output", r)
	}

	req = w.background("exec", id, "--", "cordon", "gate", "hello")
	p2 := pendingOf(t, lead, id, 1)[0]
	if code, body := lead.do(t, "POST", "/v1/gates/"+p2.ID+"/deny", `{"why":"not on a Friday"}`); code != 200 || !strings.Contains(body, `"decision":"denied"`) {
		t.Fatalf("deny: %d %s", code, body)
	}
	if r := req.wait(t); r.code != 1 || !strings.Contains(r.stderr, "not on a Friday") {
		t.Errorf("the denied requester: %v; want exit 1 and the reason", r)
	}
	followed := followLive(t, lead, id)
	if r := w.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatalf("session stop: %v", r)
	}
	if got, err := os.ReadFile(filepath.Join(auditDir, id, audit.EventsFile)); err != nil || <-followed != string(got) {
		t.Errorf("follow of the live session, stopped: want every line of its log to the seal (%v)", err)
	}

	t.Run("the auditor lists, shows, verifies and exports the run", func(t *testing.T) {
		serveAuditRun(t, lead, filepath.Join(auditDir, id), id)
	})
	t.Run("another tenant's auditor: 404 as for a missing id", func(t *testing.T) {
		crossRuns(t, beta, id)
	})
	t.Run("an agent is not an auditor: 403", func(t *testing.T) {
		for _, path := range []string{"/v1/runs", "/v1/runs/" + id, "/v1/runs/" + id + "/export"} {
			if code, _ := agent.do(t, "GET", path, ""); code != 403 {
				t.Errorf("agent GET %s: %d; want 403", path, code)
			}
		}
	})
}

func serveAuditRun(t *testing.T, a apiCall, dir, id string) {
	code, body := a.do(t, "GET", "/v1/runs", "")
	var ls audit.Listing
	if err := json.Unmarshal([]byte(body), &ls); code != 200 || err != nil || len(ls.Runs) != 1 || ls.Runs[0].ID != id || !ls.Runs[0].Sealed {
		t.Fatalf("GET /v1/runs: %d %s; want the one sealed run %s", code, body, id)
	}
	if b := os.Getenv("CORDON_BACKEND"); b != "" && ls.Runs[0].Backend != b {
		t.Errorf("the run's backend: %q; want %q (TestContainerEscapes runs this on each)", ls.Runs[0].Backend, b)
	}
	code, body = a.do(t, "GET", "/v1/runs/"+id, "")
	var show audit.Shown
	if err := json.Unmarshal([]byte(body), &show); code != 200 || err != nil || show.Run != id {
		t.Fatalf("GET /v1/runs/{id}: %d %.300s", code, body)
	}
	var decisions []string
	for _, rec := range show.Events {
		if rec.Type == "gate.approve" || rec.Type == "gate.deny" {
			decisions = append(decisions, string(rec.Type)+" "+string(rec.Body))
		}
	}
	if len(decisions) != 2 || !strings.Contains(decisions[0], `"by":"acme/lead"`) || !strings.Contains(decisions[1], `"by":"acme/lead"`) ||
		!strings.Contains(decisions[1], "not on a Friday") {
		t.Errorf("gate decisions in the log: %q; want approve and deny by acme/lead", decisions)
	}
	if code, body := a.do(t, "GET", "/v1/runs/"+id+"/verify", ""); code != 200 || !strings.Contains(body, `"ok":true`) {
		t.Errorf("verify: %d %s", code, body)
	}
	data, err := os.ReadFile(filepath.Join(dir, audit.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	if code, body := a.do(t, "GET", "/v1/runs/"+id+"/export?format=jsonl", ""); code != 200 || body != strings.TrimSpace(string(data)) {
		t.Errorf("export jsonl: %d; want the log byte for byte", code)
	}
	if code, body := a.do(t, "GET", "/v1/runs/"+id+"/export?format=ocsf", ""); code != 200 || !strings.Contains(body, `"class_uid"`) {
		t.Errorf("export ocsf: %d %.200s", code, body)
	}
	if code, body := a.do(t, "GET", "/v1/runs/"+id+"/follow", ""); code != 200 || body != strings.TrimSpace(string(data)) {
		t.Errorf("follow of a sealed run: %d; want its lines to the seal", code)
	}
}

// crossGates: every gate route with another tenant's request id answers exactly what
// it answers for an id nobody has.
func crossGates(t *testing.T, a apiCall, theirs string) {
	for _, rt := range []struct{ method, path, body string }{
		{"GET", "/v1/gates/ID", ""},
		{"POST", "/v1/gates/ID/approve", ""},
		{"POST", "/v1/gates/ID/deny", `{"why":"mine"}`},
	} {
		code, body := a.do(t, rt.method, strings.Replace(rt.path, "ID", theirs, 1), rt.body)
		mcode, mbody := a.do(t, rt.method, strings.Replace(rt.path, "ID", "0badc0de", 1), rt.body)
		if code != 404 || mcode != 404 || body != strings.Replace(mbody, "0badc0de", theirs, 1) {
			t.Errorf("%s %s: %d %s; an id nobody has: %d %s; want the same 404", rt.method, rt.path, code, body, mcode, mbody)
		}
	}
	if code, body := a.do(t, "GET", "/v1/gates", ""); code != 200 || strings.Contains(body, theirs) {
		t.Errorf("GET /v1/gates: %d %s; want none of the other tenant's", code, body)
	}
}

// crossRuns: every audit route with another tenant's run id answers exactly what it
// answers for an id nobody has.
func crossRuns(t *testing.T, a apiCall, theirs string) {
	const nobody = "20000101T000000Z-000000"
	for _, suffix := range []string{"", "/verify", "/export", "/export?format=ocsf", "/follow"} {
		code, body := a.do(t, "GET", "/v1/runs/"+theirs+suffix, "")
		mcode, mbody := a.do(t, "GET", "/v1/runs/"+nobody+suffix, "")
		if code != 404 || mcode != 404 || body != strings.Replace(mbody, nobody, theirs, 1) {
			t.Errorf("GET /v1/runs/ID%s: %d %s; an id nobody has: %d %s; want the same 404", suffix, code, body, mcode, mbody)
		}
	}
	if code, body := a.do(t, "GET", "/v1/runs", ""); code != 200 || strings.Contains(body, theirs) {
		t.Errorf("GET /v1/runs: %d %s; want none of the other tenant's", code, body)
	}
}

// followLive starts GET /v1/runs/{id}/follow of a live run, waits for its first line,
// and returns what the whole stream held once it ends.
func followLive(t *testing.T, a apiCall, id string) <-chan string {
	t.Helper()
	c := &http.Client{Transport: a.c.Transport, Timeout: 2 * time.Minute}
	resp, err := c.Get(a.base + "/v1/runs/" + id + "/follow")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		resp.Body.Close()
		t.Fatalf("follow: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	br := bufio.NewReader(resp.Body)
	first, err := br.ReadString('\n')
	if err != nil || !strings.Contains(first, `"type":"run.start"`) {
		resp.Body.Close()
		t.Fatalf("follow: first line %q, %v", first, err)
	}
	out := make(chan string, 1)
	go func() {
		defer resp.Body.Close()
		rest, _ := io.ReadAll(io.LimitReader(br, 16<<20))
		out <- first + string(rest)
	}()
	return out
}
