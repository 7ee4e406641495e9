package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/testutil"
)

const credsContract = `version: 1
credentials:
  - {name: API_TOKEN, provider: local, ttl: 10m, scope: {scopes: [read]}, why: call the internal API}
  - {name: FILE_TOKEN, provider: local, deliver: file, scope: {scopes: [write]}, why: a file-based client}
`

func (w *world) verifyToken(tok string) result {
	w.t.Helper()
	return w.cordon(tok+"\n", "token", "verify", "-")
}

func TestCredentialsLiveExactlyAsLongAsTheRun(t *testing.T) {
	w := newWorld(t)
	w.contract(credsContract)
	r := w.sh("echo \"$API_TOKEN\" > env.tok; cat /run/cordon/secrets/FILE_TOKEN > file.tok; " +
		"stat -c %a /run/cordon/secrets/FILE_TOKEN; cordon_tok=$API_TOKEN; env | grep -c '^API_TOKEN=cordon_'")
	if r.code != 0 {
		t.Fatalf("%v", r)
	}
	assertContains(t, "stdout", r.stdout, "400\n1")
	envTok, _ := os.ReadFile(filepath.Join(w.ws, "env.tok"))
	fileTok, _ := os.ReadFile(filepath.Join(w.ws, "file.tok"))
	for name, tok := range map[string]string{"env": strings.TrimSpace(string(envTok)), "file": strings.TrimSpace(string(fileTok))} {
		if !strings.HasPrefix(tok, "cordon_") {
			t.Fatalf("%s token not delivered: %q", name, tok)
		}
		// Revoked when the run ended.
		if v := w.verifyToken(tok); v.code != 1 || !strings.Contains(v.stdout, "inactive") {
			t.Errorf("%s token still valid after the run: %v", name, v)
		}
		// Never in the log, even though the command wrote it into the workspace.
		for _, rec := range lastRun(t, w) {
			if strings.Contains(string(rec.Body), tok) {
				t.Errorf("%s token in the audit log (%s)", name, rec.Type)
			}
		}
	}
	if x := w.cordon("", "explain", "--json"); strings.Contains(x.stdout, "cordon_") {
		t.Error("explain shows a token")
	}
}

func TestCredentialsRevokedByGCAfterKill9(t *testing.T) {
	w := newWorld(t)
	w.contract(credsContract)
	cmd := exec.Command(testutil.Cordon(t), "run", "--", "sh", "-c", "echo \"$API_TOKEN\" > env.tok; sleep 322")
	cmd.Dir, cmd.Env = w.ws, w.env
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tokFile := filepath.Join(w.ws, "env.tok")
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if data, _ := os.ReadFile(tokFile); strings.HasPrefix(string(data), "cordon_") {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	data, _ := os.ReadFile(tokFile)
	tok := strings.TrimSpace(string(data))
	// While the run lives the token is active, and it is nowhere on a host command line.
	if v := w.verifyToken(tok); v.code != 0 {
		t.Fatalf("token not active during the run: %v", v)
	}
	for _, pid := range processesMatching(tok) {
		t.Errorf("the token is on the command line of host process %s", pid)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if v := w.verifyToken(tok); v.code != 0 {
		t.Fatalf("before gc the crashed run's token is still recorded active (TTL is the backstop): %v", v)
	}
	g := w.cordon("", "gc")
	if v := w.verifyToken(tok); v.code != 1 {
		t.Errorf("token still valid after gc: %v", v)
	}
	// As root the ledger is the host's: any cordon run starting meanwhile (another test
	// process, CI's other lane) reconciles it first, and then gc has nothing to say.
	if !strings.Contains(g.stdout, "credential API_TOKEN of run") {
		t.Logf("gc did not revoke the token itself (another cordon's start did, first): %q", g.stdout)
	}
}

func TestCredentialProviderFailureRefusesTheRun(t *testing.T) {
	w := newWorld(t)
	w.contract("version: 1\ncredentials:\n  - {name: API_TOKEN, provider: local, why: x}\n")
	r := w.sh("echo ran > ran.txt")
	if r.code != 125 {
		t.Fatalf("want 125 when a provider fails at start, got %v", r)
	}
	assertContains(t, "stderr", r.stderr, "API_TOKEN")
	assertAbsent(t, filepath.Join(w.ws, "ran.txt"))
}

func TestSessionKilledSupervisorCredentialsRevokedByGC(t *testing.T) {
	w := newWorld(t)
	w.contract(credsContract + "gates:\n  - name: noop\n    run: [\"true\"]\n    why: its admin socket must not outlive the session\n")
	id := w.startSession()
	admin := filepath.Join(w.gateAdminDir(), id+".sock")
	if _, err := os.Stat(admin); err != nil {
		t.Fatalf("no gate admin socket for the session: %v", err)
	}
	r := w.cordon("", "exec", id, "--", "sh", "-c", "echo $API_TOKEN")
	tok := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.HasPrefix(tok, "cordon_") {
		t.Fatalf("no token in the session: %v", r)
	}
	if v := w.verifyToken(tok); v.code != 0 {
		t.Fatalf("token not active in a live session: %v", v)
	}
	pid := sessionPID(t, w, id)
	const marker = "sleep 7319"
	b := w.background("exec", id, "--", "sh", "-c", marker+" & "+marker)
	deadline := time.Now().Add(10 * time.Second)
	for len(processesMatching(marker)) < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if p := processesMatching(marker); len(p) < 2 {
		t.Fatalf("the session's sleeps never started: %v", p)
	}
	if err := linux.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	b.wait(t)
	deadline = time.Now().Add(5 * time.Second)
	for len(processesMatching(marker)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if p := processesMatching(marker); len(p) > 0 {
		t.Errorf("sandbox processes left after the supervisor was killed: %v", p)
	}
	if v := w.verifyToken(tok); v.code != 0 {
		t.Fatalf("before gc the dead session's token is still recorded active (TTL is the backstop): %v", v)
	}
	g := w.cordon("", "gc")
	assertContains(t, "gc", g.stdout, "credential API_TOKEN of run "+id)
	assertContains(t, "gc", g.stderr, "run "+id+" died before sealing its log: sealed it")
	if v := w.cordon("", "audit", "verify", id); v.code != 0 || !strings.Contains(v.stdout, "intact and sealed") {
		t.Errorf("the dead session's log after gc: %v; want intact and sealed", v)
	}
	assertAbsent(t, admin)
	if v := w.verifyToken(tok); v.code != 1 || !strings.Contains(v.stdout, "inactive") {
		t.Errorf("token still valid after gc: %v", v)
	}
}

func TestCallerSecretsNotVisible(t *testing.T) {
	w := newWorld(t)
	r := w.sh("env; cat /proc/1/environ | tr '\\0' '\\n'")
	if r.code != 0 {
		t.Fatalf("env failed: %v", r)
	}
	for _, leak := range []string{"AWS_SECRET_ACCESS_KEY", "aws-secret-value-123", "GITHUB_TOKEN", "ghp_", "SSH_AUTH_SOCK"} {
		if strings.Contains(r.stdout, leak) {
			t.Errorf("%s is visible inside the sandbox:\n%s", leak, r.stdout)
		}
	}
	assertContains(t, "env", r.stdout, "HOME="+w.home)
	assertContains(t, "env", r.stdout, "LANG=C.UTF-8")

	w.contract("version: 1\nenv:\n  pass: [LANG, AWS_SECRET_ACCESS_KEY]\n")
	r = w.cordon("", "check")
	if r.code != 1 {
		t.Fatalf("check: want 1, got %v", r)
	}
	assertContains(t, "check", r.stdout, "cordon.yaml:3:16: env.pass: AWS_SECRET_ACCESS_KEY looks like a credential")
}
