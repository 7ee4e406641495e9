package server

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/server/api"
)

// logRun writes a run with one command to root's audit log; sealed unless open.
func logRun(t *testing.T, root, id string, open bool) *audit.Writer {
	t.Helper()
	w, err := audit.Create(root, id, audit.Options{Start: audit.RunStart{Backend: "bwrap", Workspace: "/w"}})
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := w.StartCmd(audit.CmdStart{Argv: []string{"make"}, Cwd: "/w"})
	if err != nil {
		t.Fatal(err)
	}
	w.Emit(event.Event{Type: event.CmdEnd, Cmd: cmd, Body: audit.CmdEnd{ExitCode: 0}})
	if !open {
		if err := w.Close(audit.RunEnd{Reason: audit.ReasonExited}); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// TestRunsOfTheTenant: an auditor lists, shows, verifies and exports its tenant's
// runs; another tenant's auditor gets 404 for them, exactly as for a missing id; an
// approver is 403; a log that does not verify says so and is not exported.
func TestRunsOfTheTenant(t *testing.T) {
	f := newTenants(t)
	const id, other = "20261129T201530Z-3fa9c1", "20261129T201531Z-000001"
	w := logRun(t, f.acme.AuditRoot(), id, false)
	logRun(t, f.beta.AuditRoot(), other, false)
	data, err := os.ReadFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}

	code, body := f.do(t, "GET", "/v1/runs", "acme/audit", "")
	var ls api.RunList
	if err := json.Unmarshal([]byte(body), &ls); code != 200 || err != nil || ls.Schema != audit.SchemaLs || len(ls.Runs) != 1 || ls.Runs[0].ID != id || !ls.Runs[0].Sealed {
		t.Fatalf("acme lists: %d %s; want its one sealed run", code, body)
	}
	code, body = f.do(t, "GET", "/v1/runs/"+id, "acme/audit", "")
	var show api.RunShow
	if err := json.Unmarshal([]byte(body), &show); code != 200 || err != nil || show.Run != id || len(show.Events) != 4 {
		t.Errorf("acme shows: %d %.200s; want 4 events", code, body)
	}
	if code, body := f.do(t, "GET", "/v1/runs/"+id+"/verify", "acme/audit", ""); code != 200 || !strings.Contains(body, `"ok":true`) {
		t.Errorf("acme verifies: %d %s", code, body)
	}
	if code, body := f.do(t, "GET", "/v1/runs/"+id+"/export?format=jsonl", "acme/audit", ""); code != 200 || body+"\n" != string(data) {
		t.Errorf("export jsonl: %d; want the log byte for byte:\n%s", code, body)
	}
	if code, body := f.do(t, "GET", "/v1/runs/"+id+"/export?format=ocsf", "acme/audit", ""); code != 200 || !strings.Contains(body, `"class_uid"`) {
		t.Errorf("export ocsf: %d %.200s", code, body)
	}
	if code, _ := f.do(t, "GET", "/v1/runs/"+id+"/export?format=xml", "acme/audit", ""); code != 400 {
		t.Errorf("export xml: %d; want 400", code)
	}

	for _, suffix := range []string{"", "/verify", "/export", "/follow"} {
		code, body := f.do(t, "GET", "/v1/runs/"+id+suffix, "beta/lead", "")
		mcode, mbody := f.do(t, "GET", "/v1/runs/20261129T201530Z-ffffff"+suffix, "beta/lead", "")
		if code != 404 || body != `{"error":"no run `+id+`"}` || mcode != 404 || mbody != strings.Replace(body, id, "20261129T201530Z-ffffff", 1) {
			t.Errorf("beta GET /v1/runs/{acme's}%s: %d %s (missing: %d %s); want 404 as for a missing id", suffix, code, body, mcode, mbody)
		}
		if code, _ := f.do(t, "GET", "/v1/runs/"+other+suffix, "acme/audit", ""); code != 404 {
			t.Errorf("acme GET /v1/runs/{beta's}%s: %d; want 404", suffix, code)
		}
		if code, _ := f.do(t, "GET", "/v1/runs/"+id+suffix, "acme/lead", ""); code != 403 {
			t.Errorf("acme's approver GET /v1/runs/{id}%s: %d; want 403", suffix, code)
		}
	}

	// One byte changed in the middle of the log.
	bad := []byte(strings.Replace(string(data), `"make"`, `"mako"`, 1))
	if err := os.WriteFile(w.Path(), bad, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, body := f.do(t, "GET", "/v1/runs/"+id+"/verify", "acme/audit", ""); code != 200 || !strings.Contains(body, `"ok":false`) || !strings.Contains(body, `"line":2`) {
		t.Errorf("verify of an edited log: %d %s; want ok false at line 2", code, body)
	}
	if code, body := f.do(t, "GET", "/v1/runs/"+id+"/export", "acme/audit", ""); code != 409 || !strings.Contains(body, "NOT INTACT") {
		t.Errorf("export of an edited log: %d %s; want 409", code, body)
	}
}

// TestFollowOutlivesTheTimeouts follows a live run over a real HTTP server whose read
// and write timeouts are far shorter than the run: lines logged after both have passed
// still arrive, and the stream ends at the seal. A run gone without a seal ends its
// stream with an error line.
func TestFollowOutlivesTheTimeouts(t *testing.T) {
	f := newTenants(t)
	var live atomic.Bool
	live.Store(true)
	f.s.live = func(root paths.Root, _ string) bool { return string(root) == f.acme.RunRoot() && live.Load() }
	srv := httptest.NewUnstartedServer(f.s.routes())
	srv.Config.ReadTimeout, srv.Config.WriteTimeout = 200*time.Millisecond, 200*time.Millisecond
	srv.Start()
	defer srv.Close()

	const id = "20261129T201530Z-3fa9c1"
	w := logRun(t, f.acme.AuditRoot(), id, true)
	lines := follow(t, srv.URL+"/v1/runs/"+id+"/follow", f.tok["acme/audit"])
	for i := 1; i <= 3; i++ {
		if l := <-lines; !strings.Contains(l, `"seq":`+string(rune('0'+i))) {
			t.Fatalf("line %d: %s", i, l)
		}
	}
	time.Sleep(600 * time.Millisecond) // past both timeouts: what this test is about
	if err := w.Close(audit.RunEnd{Reason: audit.ReasonExited}); err != nil {
		t.Fatal(err)
	}
	if l := <-lines; !strings.Contains(l, `"type":"run.end"`) {
		t.Errorf("after the timeouts: %q; want the run.end line", l)
	}
	if l, more := <-lines; more {
		t.Errorf("after the seal: %q; want the stream ended", l)
	}

	const dead = "20261129T201531Z-000002"
	logRun(t, f.acme.AuditRoot(), dead, true)
	live.Store(false)
	var got []string
	for l := range follow(t, srv.URL+"/v1/runs/"+dead+"/follow", f.tok["acme/audit"]) {
		got = append(got, l)
	}
	if len(got) != 4 || !strings.HasPrefix(got[3], `{"error":`) || !strings.Contains(got[3], "no run.end seal") {
		t.Errorf("a run gone unsealed: %q; want its 3 lines and an error line", got)
	}
}

// follow reads the NDJSON stream at url, line by line, until it ends.
func follow(t *testing.T, url, tok string) <-chan string {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != api.NDJSON {
		t.Fatalf("follow: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	out := make(chan string, 16)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			out <- sc.Text()
		}
	}()
	return out
}

// TestShowWrittenAsEncoded: a show written one event at a time is the bytes
// json.Encoder makes of the whole document, for a run with events and for none.
func TestShowWrittenAsEncoded(t *testing.T) {
	root := t.TempDir()
	const id = "20261129T201530Z-3fa9c1"
	w := logRun(t, root, id, false)
	recs, err := audit.ReadEvents(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range []api.RunShow{api.RunShow(audit.NewShown(id, recs)), api.RunShow(audit.NewShown(id, nil)), api.RunShow(audit.NewShown(id, recs[:1]))} {
		var want, got strings.Builder
		if err := json.NewEncoder(&want).Encode(sh); err != nil {
			t.Fatal(err)
		}
		if err := writeShown(&got, sh); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("written:\n%s\nwant:\n%s", got.String(), want.String())
		}
	}
}

// TestShowsAtOnceBounded: past maxLogDocsPerTenant shows of one tenant at a time,
// the next is 429 with its quota named, at once.
func TestShowsAtOnceBounded(t *testing.T) {
	l := newLogDocsLimiter()
	for range maxLogDocsPerTenant {
		if r, q := l.acquire("acme", api.RoleAuditor); r == nil {
			t.Fatalf("refused below the bound: %s", q)
		}
	}
	if r, q := l.acquire("acme", api.RoleAuditor); r != nil || q != logDocsQuota {
		t.Fatalf("past the bound: %v %q; want %q", r != nil, q, logDocsQuota)
	}
	if r, _ := l.acquire("beta", api.RoleAuditor); r == nil {
		t.Fatal("another tenant refused")
	}
}
