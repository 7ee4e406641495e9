package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
	"github.com/cordonhq/cordon/server/api"
	"github.com/cordonhq/cordon/session/wire"
)

// TestServePool: a tenant's warm pool is started ahead of any request, each warm
// session in a workspace of its own; until claimed, a warm session is no one's (not
// listed, its id 404, also to its own tenant); a start naming no workspace claims one
// (warm: true), runs commands in it, and the pool is refilled; another tenant's start
// claims nothing of it. Charged to the tenant's quotas: a pool of 2 with a sessions
// quota of 3 leaves room for one more session.
func TestServePool(t *testing.T) {
	s := startServeWith(t, "    pools: [{name: default, size: 2, backend: bwrap}]\n    quotas: {sessions: 3}\n")
	serve := filepath.Join(filepath.Dir(s.file), "acme", "run", "serve")
	warm := func() []string { return warmIDs(t, serve) }
	s.waitClaimable(t, 2*time.Minute, "acme", "default", 2)
	acme, beta := s.tcpClient("acme"), s.tcpClient("beta")
	ids := warm()
	if code, body := acme.call(t, "GET", "/v1/sessions", nil); code != 200 || strings.Contains(body, ids[0]) || strings.Contains(body, ids[1]) {
		t.Errorf("list with an unclaimed pool: %d %s; want the warm sessions left out", code, body)
	}
	if code, _ := acme.call(t, "GET", "/v1/sessions/"+ids[0], nil); code != http.StatusNotFound {
		t.Errorf("an unclaimed warm session: %d; want 404", code)
	}

	code, body := acme.call(t, "POST", "/v1/sessions", api.StartRequest{})
	var sess api.Session
	if code != http.StatusCreated || json.Unmarshal([]byte(body), &sess) != nil || !sess.Warm || !strings.HasPrefix(sess.Workspace, "warm-") {
		t.Fatalf("claim: %d %s; want 201, warm, in a warm- workspace", code, body)
	}
	out, _, last := outcome(t, acme.exec(t, sess.ID, "sh", "-c", "echo from-the-pool > f; cat f"))
	if out != "from-the-pool\n" || last.Result == nil || last.Result.ExitCode != 0 {
		t.Errorf("exec in a claimed session: %q %+v", out, last)
	}
	if code, body := acme.call(t, "GET", "/v1/sessions/"+sess.ID, nil); code != 200 || !strings.Contains(body, `"warm":true`) {
		t.Errorf("the claimed session: %d %s; want it the tenant's", code, body)
	}
	// A claimed session's workspace is the tenant's (downloaded once stopped, below);
	// an unclaimed one's is the server's.
	for _, id := range warm() {
		var rec struct{ Workspace string }
		data, _ := os.ReadFile(filepath.Join(serve, id+".json"))
		if json.Unmarshal(data, &rec) != nil || rec.Workspace == "" {
			t.Fatalf("warm session %s's record: %s", id, data)
		}
		if code, body := acme.call(t, "GET", "/v1/workspaces/"+rec.Workspace, nil); code != http.StatusNotFound {
			t.Errorf("an unclaimed warm workspace: %d %s; want 404", code, body)
		}
		if code, body := acme.call(t, "GET", "/v1/workspaces", nil); code != 200 || strings.Contains(body, rec.Workspace) || !strings.Contains(body, sess.Workspace) {
			t.Errorf("the workspaces list: %d %s; want the claimed one, not %s", code, body, rec.Workspace)
		}
	}
	// The pool refills to 2 within the quota: 2 warm + 1 claimed = 3 sessions.
	s.waitClaimable(t, 2*time.Minute, "acme", "default", 2)
	if code, body := acme.call(t, "POST", "/v1/sessions", api.StartRequest{Workspace: "cold", Backend: "bwrap"}); code != http.StatusTooManyRequests || !strings.Contains(body, `"quota":"sessions"`) {
		t.Errorf("a cold start past the sessions quota (pool included): %d %s; want 429", code, body)
	}
	// Another tenant has no pool: its start is cold, and nothing of acme's is claimed.
	code, body = beta.call(t, "POST", "/v1/sessions", api.StartRequest{})
	var other api.Session
	if code != http.StatusCreated || json.Unmarshal([]byte(body), &other) != nil || other.Warm || !strings.HasPrefix(other.Workspace, "ws-") {
		t.Errorf("beta's start: %d %s; want a cold start in a new workspace", code, body)
	}
	if got := warm(); len(got) != 2 {
		t.Errorf("acme's pool after beta's start: %v; want 2 warm sessions", got)
	}
	for _, c := range []struct {
		a  apiClient
		id string
	}{{acme, sess.ID}, {beta, other.ID}} {
		if code, body := c.a.call(t, "POST", "/v1/sessions/"+c.id+"/stop", nil); code != 200 {
			t.Errorf("stop %s: %d %s", c.id, code, body)
		}
	}
	select {
	case addr := <-s.metrics:
		text := scrapeMetrics(t, addr)
		for _, want := range []string{
			`cordon_pool_claims_total{pool="default",result="hit",tenant="acme"} 1`,
			`cordon_pool_claims_total{pool="default",result="miss",tenant="acme"} 0`,
			`cordon_quota_refusals_total{quota="sessions",tenant="acme"} 1`,
		} {
			if !strings.Contains(text, want+"\n") {
				t.Errorf("the scrape has no %s", want)
			}
		}
		if strings.Contains(text, `cordon_pool_claims_total{pool="default",result="hit",tenant="beta"}`) {
			t.Error("beta has no pool, yet its claims are counted")
		}
	case <-time.After(30 * time.Second):
		t.Errorf("no metrics listener after 30s")
	}
	if got := acme.download(t, sess.Workspace); got["f"] != "0  from-the-pool\n" {
		t.Errorf("the claimed workspace's download: %v", got)
	}
	// A graceful stop (SIGTERM) stops the unclaimed warm sessions: no one's, they
	// would hold the tenant's quota until a restart. (SIGKILL leaves them running for
	// the next start to stop, TestServePoolRestartStopsWarm; the cleanup below stops
	// those.)
	left := warm()
	s.terminate(t)
	if now := warm(); len(now) != 0 {
		t.Errorf("after the daemon's graceful stop: warm sessions %v (of %v) still recorded running", now, left)
	}
	for _, id := range left {
		// A supervisor answers its stop once torn down, then removes its socket and
		// record and exits: a moment later, under load.
		waitFor(t, 10*time.Second, "warm session "+id+" to end after the daemon's graceful stop", func() bool {
			si, err := wire.Read(filepath.Join(filepath.Dir(serve), "sessions"), id)
			return err != nil || !si.Alive()
		})
	}
	t.Cleanup(func() {
		for _, id := range warm() {
			cmd := exec.Command(testutil.Cordon(t), "session", "stop", id)
			cmd.Env = append(os.Environ(), "CORDON_RUN_ROOT="+filepath.Dir(serve))
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("stopping warm session %s: %v: %s", id, err, out)
			}
		}
	})
}

// warmIDs lists the unclaimed warm sessions in a tenant's server records.
func warmIDs(t *testing.T, serve string) []string {
	t.Helper()
	ms, _ := filepath.Glob(filepath.Join(serve, "*.json"))
	var ids []string
	for _, m := range ms {
		data, err := os.ReadFile(m)
		if err != nil {
			continue
		}
		var rec struct {
			ID      string
			Warm    bool
			Stopped bool
		}
		if json.Unmarshal(data, &rec) == nil && rec.Warm && !rec.Stopped {
			ids = append(ids, rec.ID)
		}
	}
	return ids
}

// waitClaimable waits until tenant's pool has n warm sessions a start could claim now,
// as the daemon's cordon_pool_warm says. A warm session's record is written at its
// launch, before it is charged and on its pool's list: waiting for records, a start
// right after could miss it and start cold.
func (s *served) waitClaimable(t *testing.T, d time.Duration, tenant, pool string, n int) {
	t.Helper()
	addr := s.metricsAddr(t)
	line := fmt.Sprintf("cordon_pool_warm{pool=%q,tenant=%q} %d", pool, tenant, n)
	waitFor(t, d, fmt.Sprintf("%d claimable warm session(s) in %s's pool %s", n, tenant, pool), func() bool {
		return slices.Contains(strings.Split(scrapeMetrics(t, addr), "\n"), line)
	})
}

// metricsAddr is the daemon's metrics listener, once it listens; the address stays on
// s.metrics for whoever reads it next.
func (s *served) metricsAddr(t *testing.T) string {
	t.Helper()
	select {
	case addr := <-s.metrics:
		s.metrics <- addr // buffered: the launch's one address, put back
		return addr
	case <-time.After(30 * time.Second):
		t.Fatalf("no metrics listener after 30s:\n%s", s.stderr)
		return ""
	}
}
