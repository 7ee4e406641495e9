package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeAuditPrune: a tenant past its audit quota makes room itself. `cordon --host
// … audit prune` with an auditor's credential removes the tenant's sealed runs past the
// newest of each workspace, printed as locally; a dry run removes nothing; a
// credential with the agent role may not prune, even an auditor's; another tenant's
// runs are never touched.
func TestServeAuditPrune(t *testing.T) {
	boxTok, boxSum := newToken(t)
	s := startServeWith(t, "      - {name: box, roles: [agent, auditor], token_sha256: "+boxSum+"}\n")
	stopSessionsAtEnd(t, s)
	acme, beta := s.tcpClient("acme"), s.tcpClient("beta")
	var ids []string
	for range 2 {
		sess := acme.start(t, "pruned", "bwrap")
		if code, body := acme.call(t, "POST", "/v1/sessions/"+sess.ID+"/stop", nil); code != 200 {
			t.Fatalf("stop: %d %s", code, body)
		}
		ids = append(ids, sess.ID)
	}
	bsess := beta.start(t, "theirs", "bwrap")
	if code, body := beta.call(t, "POST", "/v1/sessions/"+bsess.ID+"/stop", nil); code != 200 {
		t.Fatalf("stop: %d %s", code, body)
	}
	dir := filepath.Dir(s.file)
	acmeAudit, betaAudit := filepath.Join(dir, "acme", "audit"), filepath.Join(dir, "beta", "audit")
	base := remoteCLI{t: t, env: cleanEnv()}.with("CORDON_HOST=unix://" + s.sock)
	auditor, agent := base, base.with("CORDON_TOKEN="+s.tokens["acme"])

	if out, errb, code := agent.run("audit", "prune", "--keep", "1"); code == 0 {
		t.Errorf("an agent's credential pruned runs: %s %s", out, errb)
	}
	// Pruning removes evidence: not with the credential an agent runs with, even one
	// that is an auditor's too.
	if out, errb, code := base.with("CORDON_TOKEN="+boxTok).run("audit", "prune", "--keep", "1"); code == 0 || !strings.Contains(errb, "agent role may not prune") {
		t.Errorf("an agent-and-auditor credential pruning: %d %s %s; want refused", code, out, errb)
	}
	out, errb, code := auditor.run("audit", "prune", "--keep", "1", "--dry-run")
	if code != 0 || !strings.Contains(out, "would remove "+ids[0]+"  ended ") || !strings.Contains(out, "workspace pruned") {
		t.Fatalf("dry run: %d %q %q; want the older run named, its workspace by name", code, out, errb)
	}
	if _, err := os.Stat(filepath.Join(acmeAudit, ids[0])); err != nil {
		t.Fatalf("a dry run removed %s: %v", ids[0], err)
	}
	out, errb, code = auditor.run("audit", "prune", "--keep", "1")
	if code != 0 || !strings.Contains(out, "removed "+ids[0]) || !strings.Contains(out, "removed 1 runs, kept 0") {
		t.Fatalf("prune --keep 1: %d %q %q", code, out, errb)
	}
	if _, err := os.Stat(filepath.Join(acmeAudit, ids[0])); !os.IsNotExist(err) {
		t.Errorf("the pruned run is still there: %v", err)
	}
	for _, p := range []string{filepath.Join(acmeAudit, ids[1]), filepath.Join(betaAudit, bsess.ID)} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s after acme's prune: %v; want it kept", p, err)
		}
	}
	if data, err := os.ReadFile(filepath.Join(acmeAudit, "prune.jsonl")); err != nil || !strings.Contains(string(data), ids[0]) {
		t.Errorf("the prune record: %v %q; want the removed run in it", err, data)
	}
	if out, errb, code := auditor.run("audit", "prune", "--older-than", "0d"); code == 0 {
		t.Errorf("prune --older-than 0d: %s %s; want refused", out, errb)
	}
}
