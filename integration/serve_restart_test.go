package integration

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/internal/testutil"
	"github.com/cordonhq/cordon/session/wire"
)

// TestServeRestartCollectsDeadSessions: a session whose supervisor is killed with
// SIGKILL, while the daemon runs (its reaper finds it) and while the daemon is down
// too (the restarted daemon finds it), is collected: its log verifies, sealed, with a
// run.end saying its cordon died; its credential is revoked; nothing it ran is left
// running; the API shows it dead with why; /metrics counts it. A running session the
// daemon has no record of is stopped when it restarts.
func TestServeRestartCollectsDeadSessions(t *testing.T) {
	testutil.RequireBwrap(t)
	base := filepath.Join(shortTempDir(t), "base.yaml")
	mustWrite(t, base, "version: 1\nnetwork: {allow: [{host: allowed.example, ports: [443]}]}\n"+
		"credentials:\n  - {name: API_TOKEN, provider: local, ttl: 10m, scope: {scopes: [read]}, why: call the internal API}\n")
	s := startServeWith(t, "    base_contract: "+base+"\n")
	stopSessionsAtEnd(t, s)
	var metricsAddr string
	select {
	case metricsAddr = <-s.metrics:
	case <-time.After(30 * time.Second):
		t.Fatalf("no metrics listener after 30s:\n%s", s.stderr)
	}

	t.Run("the supervisor killed, the daemon up: the reaper collects it", func(t *testing.T) {
		a := s.tcpClient("acme")
		d := killedSession(t, s, a, "reaped", "sleep 4251")
		serveCollected(t, s, d)
		text := scrapeMetrics(t, metricsAddr)
		for _, want := range []string{
			`cordon_dead_sessions_total{result="sealed",tenant="acme"} 1`,
			`cordon_execs_total{outcome="ok",tenant="acme"} 2`,
			`cordon_egress_denials_total{tenant="acme"} 2`,
			`cordon_exec_duration_seconds_count{tenant="acme"} `,
			`cordon_dead_sessions_total{result="sealed",tenant="beta"} 0`,
		} {
			if !strings.Contains(text, want) {
				t.Errorf("the scrape has no %s", want)
			}
		}
		if t.Failed() {
			t.Logf("scrape:\n%s", text)
		}
	})
	t.Run("the daemon and the supervisor killed: the restart collects it", func(t *testing.T) {
		a := s.tcpClient("acme")
		d := killedSession(t, s, a, "restarted", "sleep 4252")
		// Killed mid-exec: the daemon first, then the supervisor.
		if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-s.done
		d.kill(t)
		s.launch(t)
		serveCollected(t, s, d) // the API answers once the adoption is done
		if !strings.Contains(s.stderr.String(), `"msg":"session died; log sealed"`) {
			t.Errorf("the restarted daemon did not log the seal:\n%s", s.stderr)
		}
	})
	t.Run("a session the daemon has no record of: the restart stops it", func(t *testing.T) {
		// As a daemon killed between a supervisor's start and its record leaves it.
		if s.cmd.ProcessState != nil {
			// Stopped at the end of the subtest that launched it, gracefully: its
			// tenants' disks are unmounted. The session below is made on acme's.
			s.launch(t)
		}
		root := s.tenantRoot("acme")
		ws := filepath.Join(root, "workspaces", "unrecorded")
		mustMkdir(t, ws)
		cmd := exec.Command(testutil.Cordon(t), "session", "start", "--backend", "bwrap", "--audit-dir", filepath.Join(root, "audit"))
		cmd.Dir, cmd.Env = ws, append(os.Environ(), paths.RunRootEnv+"="+filepath.Join(root, "run"))
		r := runResult(t, cmd, "session start")
		id := strings.TrimSpace(r.stdout)
		info, err := wire.Read(paths.Root(filepath.Join(root, "run")).Sessions(), id)
		if r.code != 0 || err != nil {
			t.Fatalf("session start: %v; %v", r, err)
		}
		if s.cmd.ProcessState == nil { // not ended with the subtest that launched it
			if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			<-s.done
		}
		s.launch(t)
		s.tcpClient("acme").call(t, "GET", "/v1/sessions", nil) // answered once the adoption is done
		// Stopped before the daemon served: its stop answered, it exits right after.
		waitFor(t, 20*time.Second, "the unrecorded session's supervisor to exit", func() bool { return !processAlive(info.PID) })
		r = runResult(t, exec.Command(testutil.Cordon(t), "audit", "verify", id, "--audit-dir", filepath.Join(root, "audit")), "audit verify")
		if r.code != 0 || !strings.Contains(r.stdout, id+": intact and sealed") {
			t.Errorf("cordon audit verify %s: %s; want intact and sealed (stopped, not killed)", id, r)
		}
	})
}

// deadSession is a session whose supervisor is being killed: its id, its credential,
// and every process of it (the supervisor and its descendants).
type deadSession struct {
	id, token, marker string
	supervisor        int
	pids              []int
}

func (d deadSession) kill(t *testing.T) {
	t.Helper()
	if err := linux.Kill(d.supervisor, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
}

// killedSession starts a session in workspace ws, reads its credential, starts
// marker (a sleep) streaming in it, notes every process of it, and SIGKILLs its
// supervisor unless the daemon must go first (ws "restarted": the caller kills it).
func killedSession(t *testing.T, s *served, a apiClient, ws, marker string) deadSession {
	t.Helper()
	sess := a.start(t, ws, "bwrap")
	out, _, last := outcome(t, a.exec(t, sess.ID, "sh", "-c", "echo $API_TOKEN"))
	d := deadSession{id: sess.ID, token: strings.TrimSpace(out), marker: marker}
	if last.Result == nil || last.Result.ExitCode != 0 || !strings.HasPrefix(d.token, "cordon_") {
		t.Fatalf("no credential in the session: %q, %+v", out, last)
	}
	if v := verifyToken(t, d.token); v.code != 0 {
		t.Fatalf("the credential is not active in a live session: %v", v)
	}
	_, _, last = outcome(t, a.exec(t, sess.ID, "sh", "-c",
		"wget -q -O /dev/null http://denied.example:8080/; wget -q -O /dev/null http://denied.example:8080/; true"))
	if last.Result == nil || len(last.Result.DeniedEgress) != 2 {
		t.Errorf("two denied connections: %+v; want them in denied_egress", last)
	}
	resp := streamStarted(t, a, sess.ID, "started\n", "sh", "-c", "echo started; exec "+marker)
	t.Cleanup(func() { resp.Body.Close() })
	waitRunning(t, marker, true, "while the exec streams")
	info, err := wire.Read(paths.Root(filepath.Join(s.tenantRoot("acme"), "run")).Sessions(), sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	d.supervisor = info.PID
	d.pids = append(descendants(info.PID), info.PID)
	if len(d.pids) < 3 {
		t.Fatalf("the session's processes: %v; want the supervisor, its sandbox and the sleep", d.pids)
	}
	if ws != "restarted" {
		d.kill(t)
	}
	return d
}

// serveCollected waits until the daemon shows session d dead, with why, then checks
// that its log verifies sealed by gc, its credential is revoked, and that none of its
// processes runs.
func serveCollected(t *testing.T, s *served, d deadSession) {
	t.Helper()
	a := s.tcpClient("acme")
	deadline := time.Now().Add(90 * time.Second)
	for got := a.session(t, d.id); got.State != "dead" || got.Ended == ""; got = a.session(t, d.id) {
		if time.Now().After(deadline) {
			t.Fatalf("session %s after its supervisor died: %+v; want dead, with why\n%s", d.id, got, s.stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
	auditDir := filepath.Join(s.tenantRoot("acme"), "audit")
	r := runResult(t, exec.Command(testutil.Cordon(t), "audit", "verify", d.id, "--audit-dir", auditDir), "audit verify")
	if r.code != 0 || !strings.Contains(r.stdout, d.id+": intact and sealed") {
		t.Errorf("cordon audit verify %s: %s; want intact and sealed", d.id, r)
	}
	data, _ := os.ReadFile(filepath.Join(auditDir, d.id, "events.jsonl"))
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, `"type":"run.end"`) || !strings.Contains(last, "sealed by cordon gc") {
		t.Errorf("the seal: %s; want a run.end saying cordon gc sealed it", last)
	}
	if v := verifyToken(t, d.token); v.code != 1 || !strings.Contains(v.stdout, "inactive") {
		t.Errorf("the dead session's credential after its collection: %v; want inactive", v)
	}
	waitRunning(t, d.marker, false, "once the session is collected")
	for _, pid := range d.pids {
		if processAlive(pid) {
			t.Errorf("process %d of the dead session still runs: %s", pid, describeProcesses([]string{strconv.Itoa(pid)}))
		}
	}
}

func verifyToken(t *testing.T, tok string) result {
	t.Helper()
	cmd := exec.Command(testutil.Cordon(t), "token", "verify", "-")
	cmd.Stdin = strings.NewReader(tok + "\n")
	return runResult(t, cmd, "token verify")
}

// processAlive reports whether pid is a process that is not a zombie.
func processAlive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(data), ')')
	f := strings.Fields(string(data)[i+1:])
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

func scrapeMetrics(t *testing.T, addr string) string {
	t.Helper()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
