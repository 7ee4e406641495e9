package integration

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/testutil"
	"github.com/cordonhq/cordon/server/api"
)

// tenantCLIs are the real `cordon --host` of one served daemon, over TLS, as three
// credentials: acme's agent (its token), acme's lead (approver and auditor, a client
// certificate) and beta's lead.
type tenantCLIs struct {
	agent, lead, beta func(args ...string) (string, string, int)
}

func newTenantCLIs(t *testing.T, s *served) tenantCLIs {
	t.Helper()
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	mustWrite(t, caFile, string(s.ca.pem))
	base := remoteCLI{t: t, env: cleanEnv()}.with("CORDON_HOST=https://"+s.addr, "CORDON_TLS_CA="+caFile)
	withCert := func(cn string) func(args ...string) (string, string, int) {
		_, certPEM, keyPEM := s.ca.issue(t, cn, false)
		cert, key := filepath.Join(dir, cn+".pem"), filepath.Join(dir, cn+".key")
		mustWrite(t, cert, string(certPEM))
		if err := os.WriteFile(key, keyPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		return func(args ...string) (string, string, int) {
			return base.run(append([]string{"--tls-cert", cert, "--tls-key", key}, args...)...)
		}
	}
	return tenantCLIs{
		agent: base.with("CORDON_TOKEN=" + s.tokens["acme"]).run,
		lead:  withCert("lead.acme"),
		beta:  withCert("lead.beta"),
	}
}

// stagedSession starts a staged session of acme in its workspace ws through the API,
// runs script in it, stops it and returns its id: its changes wait in its stage.
func stagedSession(t *testing.T, a apiClient, ws, script string) string {
	t.Helper()
	code, body := a.call(t, "POST", "/v1/sessions", api.StartRequest{Workspace: ws, Backend: "bwrap", Stage: true})
	var sess api.Session
	if code != http.StatusCreated || json.Unmarshal([]byte(body), &sess) != nil || !sess.Stage {
		t.Fatalf("a staged start: got %d %s; want 201, stage true", code, body)
	}
	if _, _, res := outcome(t, a.exec(t, sess.ID, "sh", "-c", script)); res.Result == nil || res.Result.ExitCode != 0 {
		t.Fatalf("exec %q: %+v", script, res)
	}
	if code, body := a.call(t, "POST", "/v1/sessions/"+sess.ID+"/stop", nil); code != 200 {
		t.Fatalf("stop: %d %s", code, body)
	}
	return sess.ID
}

// TestServeStage: a staged session's changes wait in its stage until acme's approver
// applies them with `cordon --host … apply` (they land on the workspace; the log
// records acme/lead and still verifies, read the same through the server as here;
// a conflict is listed and lands nothing until --force) or discards them (the
// workspace is untouched). acme's agent cannot apply or discard
// (403: applying is the approver's); beta gets, for acme's run, the 404 a missing run
// gets, through the API and the CLI.
func TestServeStage(t *testing.T) {
	s := startServe(t)
	stopSessionsAtEnd(t, s)
	agent := s.tcpClient("acme")
	clis := newTenantCLIs(t, s)
	ws := filepath.Join(s.tenantRoot("acme"), "workspaces", "staged")
	auditDir := filepath.Join(s.tenantRoot("acme"), "audit")

	id := stagedSession(t, agent, "staged", "echo landed > f")
	if _, err := os.Stat(filepath.Join(ws, "f")); !os.IsNotExist(err) {
		t.Fatalf("f is on the workspace before any apply (%v)", err)
	}

	t.Run("the agent cannot apply or discard: 403", func(t *testing.T) {
		for _, verb := range []string{"apply", "discard"} {
			if _, stderr, code := clis.agent(verb, id); code != 125 || !strings.Contains(stderr, "approver role") || !strings.Contains(stderr, "403") {
				t.Errorf("agent cordon --host %s: exit %d, %q; want 125, 403 approver role", verb, code, stderr)
			}
		}
	})
	t.Run("another tenant: 404 as for a missing run", func(t *testing.T) {
		betaCert, _, _ := s.ca.issue(t, "lead.beta", false)
		beta := apiCall{base: "https://" + s.addr, c: s.client(betaCert)}
		const missing = "20261129T201530Z-ffffff"
		for _, call := range []struct{ method, suffix, body string }{
			{"POST", "/apply", "{}"}, {"POST", "/discard", ""}, {"GET", "", ""}, {"GET", "/verify", ""},
		} {
			code, body := beta.do(t, call.method, "/v1/runs/"+id+call.suffix, call.body)
			mcode, mbody := beta.do(t, call.method, "/v1/runs/"+missing+call.suffix, call.body)
			if code != 404 || mcode != 404 || mbody != strings.Replace(body, id, missing, 1) {
				t.Errorf("beta %s /v1/runs/{acme's}%s: %d %s (missing: %d %s); want 404 as for a missing run", call.method, call.suffix, code, body, mcode, mbody)
			}
		}
		for _, verb := range []string{"apply", "discard"} {
			if _, stderr, code := clis.beta(verb, id); code != 1 || !strings.Contains(stderr, "run not found") {
				t.Errorf("beta cordon --host %s: exit %d, %q; want 1, run not found", verb, code, stderr)
			}
		}
		if _, stderr, code := clis.beta("audit", "verify", id); code == 0 || !strings.Contains(stderr, "run not found") {
			t.Errorf("beta cordon --host audit verify: exit %d, %q; want run not found", code, stderr)
		}
	})
	if _, err := os.Stat(filepath.Join(ws, "f")); !os.IsNotExist(err) {
		t.Fatalf("f is on the workspace after refused applies (%v)", err)
	}

	t.Run("the approver applies: it lands, the log says who and verifies", func(t *testing.T) {
		stdout, stderr, code := clis.lead("apply", id)
		if want := "applied 1 path(s) of run " + id + "; 0 still staged\n"; code != 0 || stdout != want {
			t.Fatalf("lead cordon --host apply: exit %d, %q %q; want %q", code, stdout, stderr, want)
		}
		if got, err := os.ReadFile(filepath.Join(ws, "f")); err != nil || string(got) != "landed\n" {
			t.Errorf("f on the workspace: %q, %v; want landed", got, err)
		}
		if _, stderr, code := clis.lead("apply", id); code != 1 || !strings.Contains(stderr, "nothing staged") {
			t.Errorf("a second apply: exit %d, %q; want 1, nothing staged", code, stderr)
		}
		out, _, code := clis.lead("audit", "show", id, "--json")
		if code != 0 || !strings.Contains(out, `"stage.apply"`) || !strings.Contains(out, `"by": "acme/lead"`) {
			t.Errorf("audit show --json: exit %d; want a stage.apply by acme/lead:\n%.2000s", code, out)
		}
		// The same output through the server as here, for verify, show and ls.
		for _, args := range [][]string{{"audit", "verify", id}, {"audit", "show", id}, {"audit", "ls"}, {"audit", "show", id, "--json"}} {
			remote, _, rcode := clis.lead(args...)
			local := exec.Command(testutil.Cordon(t), append(args, "--audit-dir", auditDir)...)
			local.Env = cleanEnv()
			lout, err := local.Output()
			if rcode != 0 || err != nil || remote != string(lout) {
				t.Errorf("cordon %q: --host (exit %d) and here (%v) differ:\n%s\n---\n%s", args, rcode, err, remote, lout)
			}
		}
		if out, _, code := clis.lead("audit", "verify", id); code != 0 || !strings.Contains(out, id+": intact and sealed") {
			t.Errorf("audit verify: exit %d, %q", code, out)
		}
	})

	t.Run("a conflict is listed and lands nothing; --force lands over it", func(t *testing.T) {
		id3 := stagedSession(t, agent, "staged", "echo sandbox > h; echo also > i")
		mustWrite(t, filepath.Join(ws, "h"), "host\n") // the workspace changes underneath the stage
		_, stderr, code := clis.lead("apply", id3)
		if code != 1 || !strings.Contains(stderr, "cordon: conflict: h changed in the workspace since the run started") {
			t.Fatalf("apply over a conflict: exit %d, %q; want 1 naming h", code, stderr)
		}
		if _, err := os.Stat(filepath.Join(ws, "i")); !os.IsNotExist(err) {
			t.Errorf("i landed although the apply was refused (%v)", err)
		}
		stdout, stderr, code := clis.lead("apply", "--force", id3)
		if want := "applied 2 path(s) of run " + id3 + "; 0 still staged\n"; code != 0 || stdout != want {
			t.Fatalf("apply --force: exit %d, %q %q; want %q", code, stdout, stderr, want)
		}
		if got, _ := os.ReadFile(filepath.Join(ws, "h")); string(got) != "sandbox\n" {
			t.Errorf("h after apply --force: %q; want the sandbox's", got)
		}
	})

	t.Run("the approver discards: the workspace is untouched", func(t *testing.T) {
		id2 := stagedSession(t, agent, "staged", "echo dropped > g; echo changed > f")
		stdout, stderr, code := clis.lead("discard", id2)
		if want := "discarded 2 path(s) of run " + id2 + "\n"; code != 0 || stdout != want {
			t.Fatalf("lead cordon --host discard: exit %d, %q %q; want %q", code, stdout, stderr, want)
		}
		if _, err := os.Stat(filepath.Join(ws, "g")); !os.IsNotExist(err) {
			t.Errorf("g is on the workspace after a discard (%v)", err)
		}
		if got, _ := os.ReadFile(filepath.Join(ws, "f")); string(got) != "landed\n" {
			t.Errorf("f after a discard: %q; want landed, as applied before", got)
		}
		if _, stderr, code := clis.lead("apply", id2); code != 1 || !strings.Contains(stderr, "nothing staged") {
			t.Errorf("apply after discard: exit %d, %q; want 1, nothing staged", code, stderr)
		}
	})
}

// TestServeRemoteGateAndAudit: the gate and audit commands through `cordon --host`: a
// session of acme asks for a gate; acme's lead lists it and approves it (the
// requester gets the operation's output), acme's agent cannot (403) and beta's lead
// is told there is no such request; after the stop, the lead lists, verifies and
// exports and follows the run (byte for byte the log), and root on the unix socket (acme's
// auditor by its uid) verifies it with no token.
func TestServeRemoteGateAndAudit(t *testing.T) {
	s := startServe(t)
	clis := newTenantCLIs(t, s)
	w, auditDir := tenantWorld(t, s, "acme")
	w.contract(serveGateContract)
	id := w.startSession("--gates", "ask", "--audit-dir", auditDir)
	base := "https://" + s.addr
	leadCert, _, _ := s.ca.issue(t, "lead.acme", false)
	lead := apiCall{base: base, c: s.client(leadCert)}

	req := w.background("exec", id, "--", "cordon", "gate", "hello")
	p := pendingOf(t, lead, id, 1)[0]
	if out, stderr, code := clis.lead("gate", "ls"); code != 0 || !strings.Contains(out, p.ID) || !strings.Contains(out, "hello") {
		t.Errorf("lead gate ls: exit %d, %q %q; want the request", code, out, stderr)
	}
	if out, _, code := clis.lead("gate", "show", p.ID); code != 0 || !strings.Contains(out, "request "+p.ID+": gate hello of run "+id) {
		t.Errorf("lead gate show: exit %d, %q", code, out)
	}
	if _, stderr, code := clis.agent("gate", "approve", p.ID); code != 125 || !strings.Contains(stderr, "approver role") {
		t.Errorf("agent gate approve: exit %d, %q; want 125, approver role", code, stderr)
	}
	for _, verb := range []string{"show", "approve"} {
		if _, stderr, code := clis.beta("gate", verb, p.ID); code != 1 || !strings.Contains(stderr, "no pending request") {
			t.Errorf("beta gate %s of acme's request: exit %d, %q; want 1, no pending request", verb, code, stderr)
		}
	}
	if ps := pendingOf(t, lead, id, 1); ps[0].ID != p.ID {
		t.Fatalf("after the refused approvals: %+v; want %s still pending", ps, p.ID)
	}
	out, stderr, code := clis.lead("gate", "approve", p.ID)
	if want := "approved " + p.ID + "; the operation runs now and its output goes to the requester\n"; code != 0 || out != want {
		t.Fatalf("lead gate approve: exit %d, %q %q; want %q", code, out, stderr, want)
	}
	if r := req.wait(t); r.code != 0 || !strings.Contains(r.stdout, "hi from the host") {
		t.Errorf("the approved requester: %v; want exit 0 and the operation's output", r)
	}
	if r := w.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatalf("session stop: %v", r)
	}

	if out, _, code := clis.lead("audit", "ls"); code != 0 || !strings.Contains(out, id) {
		t.Errorf("lead audit ls: exit %d, %q; want the run", code, out)
	}
	if out, _, code := clis.lead("audit", "show", "last", "--json"); code != 0 || !strings.Contains(out, `"by": "acme/lead"`) {
		t.Errorf("lead audit show last --json: exit %d; want the approval by acme/lead:\n%.2000s", code, out)
	}
	export := filepath.Join(t.TempDir(), "run.jsonl")
	if _, stderr, code := clis.lead("audit", "export", id, "--format", "jsonl", "-o", export); code != 0 {
		t.Fatalf("lead audit export: exit %d, %q", code, stderr)
	}
	got, _ := os.ReadFile(export)
	if want, err := os.ReadFile(filepath.Join(auditDir, id, "events.jsonl")); err != nil || string(got) != string(want) {
		t.Errorf("the export is not the log byte for byte (%v)", err)
	}
	// The report of a server's run is the report of its log, as here.
	remoteHTML, localHTML := filepath.Join(t.TempDir(), "remote.html"), filepath.Join(t.TempDir(), "local.html")
	if _, stderr, code := clis.lead("audit", "report", id, "-o", remoteHTML); code != 0 {
		t.Errorf("lead audit report: exit %d, %q", code, stderr)
	}
	if r := w.cordon("", "audit", "report", id, "--audit-dir", auditDir, "-o", localHTML); r.code != 0 {
		t.Errorf("local audit report: %v", r)
	}
	rh, _ := os.ReadFile(remoteHTML)
	lh, _ := os.ReadFile(localHTML)
	if len(rh) == 0 || string(rh) != string(lh) || !strings.Contains(string(rh), id) {
		t.Errorf("the report through the server (%d bytes) is not the report of the log here (%d bytes)", len(rh), len(lh))
	}
	if _, stderr, code := clis.agent("audit", "report", id, "-o", "-"); code != 125 || !strings.Contains(stderr, "auditor role") {
		t.Errorf("agent audit report: exit %d, %q; want 125, auditor role", code, stderr)
	}
	if out, stderr, code := clis.lead("audit", "follow", id); code != 0 || out != string(got) {
		t.Errorf("lead audit follow of the sealed run: exit %d, %q; want every line of its log, exit 0", code, stderr)
	}
	if _, stderr, code := clis.agent("audit", "follow", id); code != 125 || !strings.Contains(stderr, "auditor role") {
		t.Errorf("agent audit follow: exit %d, %q; want 125, auditor role", code, stderr)
	}
	root := remoteCLI{t: t, env: cleanEnv()}
	if out, stderr, code := root.run("--host", "unix://"+s.sock, "audit", "verify", id); code != 0 || !strings.HasPrefix(out, id+": intact and sealed") {
		t.Errorf("root on the socket: audit verify: exit %d, %q %q", code, out, stderr)
	}
	if _, stderr, code := root.run("--host", "unix://"+s.sock, "gate", "ls"); code != 125 || !strings.Contains(stderr, "approver role") {
		t.Errorf("root (an auditor only) gate ls: exit %d, %q; want 125, approver role", code, stderr)
	}
}
