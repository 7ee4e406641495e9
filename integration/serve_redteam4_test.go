package integration

import (
	"archive/tar"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
	"github.com/cordonhq/cordon/server/api"
)

// Red team, round 4: warm pools, the tenant's disk, prune, the request path.

// workspaceNames lists the tenant's workspaces as the API answers them.
func workspaceNames(t *testing.T, a apiClient) []string {
	t.Helper()
	code, body := a.call(t, "GET", "/v1/workspaces", nil)
	var list api.WorkspaceList
	if code != http.StatusOK || json.Unmarshal([]byte(body), &list) != nil {
		t.Fatalf("GET /v1/workspaces: %d %s", code, body)
	}
	var names []string
	for _, w := range list.Workspaces {
		names = append(names, w.Name)
	}
	return names
}

// TestRed4FailedRefillLeavesNoWorkspace: a pool whose refill cannot start (here the
// tenant's sessions quota is full after the claim) tries again every 2 s. Each try
// must leave nothing behind: an empty warm-* directory per try would be listed as the
// tenant's, count against its workspaces quota, and fill its disk's inodes without
// bound.
func TestRed4FailedRefillLeavesNoWorkspace(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServeWith(t, "    pools: [{name: default, size: 1, backend: bwrap}]\n    quotas: {sessions: 1, workspaces: 3}\n")
	stopPoolAtEnd(t, s)
	serve := filepath.Join(filepath.Dir(s.file), "acme", "run", "serve")
	waitFor(t, 2*time.Minute, "a warm session", func() bool { return len(warmIDs(t, serve)) == 1 })
	s.waitClaimable(t, time.Minute, "acme", "default", 1)
	acme := s.tcpClient("acme")
	code, body := acme.call(t, "POST", "/v1/sessions", api.StartRequest{})
	var sess api.Session
	if code != http.StatusCreated || json.Unmarshal([]byte(body), &sess) != nil || !sess.Warm {
		t.Fatalf("claim: %d %s", code, body)
	}
	// The refill is refused at the sessions quota, again and again.
	waitFor(t, time.Minute, "four refused refills", func() bool {
		return strings.Count(s.stderr.String(), "warm pool: no session started") >= 4
	})
	if got := workspaceNames(t, acme); len(got) != 1 || got[0] != sess.Workspace {
		t.Errorf("the tenant's workspaces after refused refills: %q; want only the claimed session's %q", got, sess.Workspace)
	}
	entries, _ := os.ReadDir(filepath.Join(filepath.Dir(s.file), "acme", "workspaces"))
	if len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("the workspaces root holds %q; want only %q", names, sess.Workspace)
	}
	// Its workspaces quota is its own: the refused refills took none of it.
	if code, body := acme.upload(t, "mine", makeTar(t, tarEntry{name: "f", typ: tar.TypeReg, data: "x"})); code != http.StatusCreated {
		t.Errorf("an upload after refused refills: %d %s; want 201", code, body)
	}
}

// TestRed4WarmWorkspaceBeforeItsRecord: a warm session's workspace is the server's
// from the moment it is made, not only once its record says warm. Between the two (the
// supervisor's start, a second or more) a tenant listing its workspaces must not see
// it, and must not upload into it, start a session of its own in it or delete it: what
// it put there would be in the session the next claimant gets, which "has never run
// anything before its claim".
func TestRed4WarmWorkspaceBeforeItsRecord(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServeWith(t, "    pools: [{name: default, size: 1, backend: bwrap}]\n    quotas: {sessions: 8}\n")
	stopPoolAtEnd(t, s)
	serve := filepath.Join(filepath.Dir(s.file), "acme", "run", "serve")
	acme := s.tcpClient("acme")
	poison := makeTar(t, tarEntry{name: "poison", typ: tar.TypeReg, data: "planted before the claim"})
	claimed := map[string]bool{}
	var seen, wrote []string
	// Three fills of the pool: the first at the server's start, two after claims.
	for round := 0; round < 3; round++ {
		deadline := time.Now().Add(2 * time.Minute)
		for len(warmIDs(t, serve)) < 1 && time.Now().Before(deadline) {
			for _, n := range workspaceNames(t, acme) {
				if !strings.HasPrefix(n, "warm-") || claimed[n] {
					continue
				}
				if !slices.Contains(seen, n) {
					seen = append(seen, n)
				}
				if code, _ := acme.upload(t, n, poison); code == http.StatusCreated {
					wrote = append(wrote, n)
				}
			}
		}
		code, body := acme.call(t, "POST", "/v1/sessions", api.StartRequest{})
		var sess api.Session
		if code != http.StatusCreated || json.Unmarshal([]byte(body), &sess) != nil {
			t.Fatalf("claim: %d %s", code, body)
		}
		t.Cleanup(func() { acme.call(t, "POST", "/v1/sessions/"+sess.ID+"/stop", nil) })
		claimed[sess.Workspace] = true
		if sess.Warm {
			if out, _, last := outcome(t, acme.exec(t, sess.ID, "cat", "poison")); last.Result != nil && last.Result.ExitCode == 0 {
				t.Errorf("round %d: the claimed warm session %s holds a file the tenant uploaded before its claim: %q", round, sess.ID, out)
			}
		}
	}
	if len(seen) > 0 {
		t.Errorf("unclaimed warm workspaces were listed as the tenant's: %q (uploaded into: %q)", seen, wrote)
	}
}

// retiredWarm is the ids of the warm sessions the daemon retired (stopped unclaimed,
// their workspace and record removed), from its log.
func retiredWarm(s *served) []string {
	var ids []string
	for _, line := range strings.Split(s.stderr.String(), "\n") {
		var l struct{ Msg, Session string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "warm pool: session retired" {
			ids = append(ids, l.Session)
		}
	}
	return ids
}

// TestRed4UnclaimedWarmLeavesNoWorkspace: a warm session no one claimed is stopped at
// its tenant's wall time (and replaced), and at the server's graceful stop. Its
// workspace must go with it: kept, each would stay hidden (its record says warm) and
// grow the tenant's root every wall time and every restart, and once its record is
// forgotten (past 256 stopped ones) be listed and counted as the tenant's workspace.
func TestRed4UnclaimedWarmLeavesNoWorkspace(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServeWith(t, "    pools: [{name: default, size: 1, backend: bwrap}]\n    quotas: {wall: 2s}\n")
	stopPoolAtEnd(t, s)
	serve := filepath.Join(filepath.Dir(s.file), "acme", "run", "serve")
	wsRoot := filepath.Join(filepath.Dir(s.file), "acme", "workspaces")
	waitFor(t, 2*time.Minute, "two warm sessions retired at their wall time", func() bool { return len(retiredWarm(s)) >= 2 })
	waitFor(t, time.Minute, "a warm session", func() bool { return len(warmIDs(t, serve)) == 1 })
	entries, _ := os.ReadDir(wsRoot)
	if len(entries) > 2 { // the warm one, and perhaps one starting; kept, the 2 retired would make 3
		t.Errorf("the workspaces root holds %d entries after 2 warm sessions were stopped at their wall time; want at most 2", len(entries))
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the daemon did not stop within 2 minutes of SIGTERM")
	}
	// The disk is unmounted at the stop: what it holds is seen at the next start.
	s.launch(t)
	waitFor(t, 2*time.Minute, "a warm session after the restart", func() bool { return len(warmIDs(t, serve)) == 1 })
	if entries, _ := os.ReadDir(wsRoot); len(entries) > 2 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("after a graceful stop and a start, with nothing claimed, the workspaces root holds %q; want the new warm session's only", names)
	}
	// A daemon killed leaves its warm sessions running; the next stops them, and
	// their workspaces, empty, go too.
	left := warmIDs(t, serve)
	leftWS := map[string]string{}
	for _, id := range left {
		var rec struct{ Workspace string }
		data, err := os.ReadFile(filepath.Join(serve, id+".json"))
		if err != nil || json.Unmarshal(data, &rec) != nil || rec.Workspace == "" {
			t.Fatalf("the record of %s: %v %s", id, err, data)
		}
		leftWS[id] = rec.Workspace
	}
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-s.done
	s.launch(t)
	waitFor(t, 2*time.Minute, "a new warm session after the kill", func() bool {
		now := warmIDs(t, serve)
		return len(now) == 1 && !slices.Contains(left, now[0])
	})
	for id, ws := range leftWS {
		if _, err := os.Lstat(filepath.Join(serve, id+".json")); err == nil {
			t.Errorf("after a kill and a start, warm session %s, stopped unclaimed, is still recorded", id)
		}
		if _, err := os.Lstat(filepath.Join(wsRoot, ws)); err == nil {
			t.Errorf("after a kill and a start, the workspace %s of warm session %s, stopped unclaimed, is still there", ws, id)
		}
	}
}

// TestRed4CheckpointQueue: a staged session's checkpoints are taken one at a time
// (each copies what the session changed), so concurrent checkpoint requests queue in
// its supervisor, each holding a connection as long as the ones before it take. They
// are long requests like a stop: past the tenant's 32 the answer must be 429
// held_requests at once, never one more connection held in a queue.
func TestRed4CheckpointQueue(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServe(t)
	stopSessionsAtEnd(t, s)
	acme := s.tcpClient("acme")
	code, body := acme.call(t, "POST", "/v1/sessions", api.StartRequest{Workspace: "big", Backend: "bwrap", Stage: true})
	var sess api.Session
	if code != http.StatusCreated || json.Unmarshal([]byte(body), &sess) != nil {
		t.Fatalf("start: %d %s", code, body)
	}
	// Many files changed: each checkpoint has them to copy or link, a quarter of a
	// second or so, while the n requests arrive; those past the 32 admitted arrive
	// before the first few end, however slowly the requests are sent.
	if _, _, last := outcome(t, acme.exec(t, sess.ID, "sh", "-c", "mkdir d && cd d && seq 1 4000 | xargs touch")); last.Result == nil || last.Result.ExitCode != 0 {
		t.Fatalf("making files: %+v", last)
	}
	const n = 80
	codes := make(chan int, n)
	var wg sync.WaitGroup
	t0 := time.Now()
	for range n {
		wg.Go(func() {
			code, _ := acme.call(t, "POST", "/v1/sessions/"+sess.ID+"/checkpoint", api.CheckpointRequest{})
			codes <- code
		})
	}
	wg.Wait()
	close(codes)
	count := map[int]int{}
	for c := range codes {
		count[c]++
	}
	t.Logf("%d checkpoints at once: %v in %v", n, count, time.Since(t0))
	if count[http.StatusTooManyRequests] == 0 {
		t.Errorf("%d checkpoints at once: %v; want those past the tenant's 32 long requests refused 429", n, count)
	}
}

// TestRed4StagedWarmLeavesNoStage: a staged pool's warm session stopped unclaimed (at
// the tenant's wall time, and replaced) staged nothing for anyone: nothing ran in it.
// Its run must not keep a stage waiting for an approver's apply or discard, which
// `audit prune` never removes: every wall time would add runs the tenant can prune
// only by discarding each, until its audit root is past its quota.
func TestRed4StagedWarmLeavesNoStage(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServeWith(t, "    pools: [{name: st, size: 1, backend: bwrap, stage: true}]\n    quotas: {wall: 2s}\n")
	stopPoolAtEnd(t, s)
	auditRoot := filepath.Join(filepath.Dir(s.file), "acme", "audit")
	waitFor(t, 2*time.Minute, "a staged warm session retired at its wall time", func() bool { return len(retiredWarm(s)) >= 1 })
	for _, id := range retiredWarm(s) {
		if _, err := os.Lstat(filepath.Join(auditRoot, id, "stage")); err == nil {
			t.Errorf("warm session %s, stopped unclaimed, left a stage in its run: prune keeps it until an approver discards it", id)
		}
	}
}

// TestRed4ConcurrentClaims: starts racing for a pool's warm sessions each get a
// session of their own: never one session, or one workspace, twice; no more claimed
// than the pool held.
func TestRed4ConcurrentClaims(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServeWith(t, "    pools: [{name: default, size: 3, backend: bwrap}]\n    quotas: {sessions: 10}\n")
	stopPoolAtEnd(t, s)
	serve := filepath.Join(filepath.Dir(s.file), "acme", "run", "serve")
	waitFor(t, 2*time.Minute, "three warm sessions", func() bool { return len(warmIDs(t, serve)) == 3 })
	acme := s.tcpClient("acme")
	const n = 8
	got := make(chan api.Session, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			code, body := acme.call(t, "POST", "/v1/sessions", api.StartRequest{})
			var sess api.Session
			if code != http.StatusCreated || json.Unmarshal([]byte(body), &sess) != nil {
				t.Errorf("start: %d %s", code, body)
				return
			}
			got <- sess
		})
	}
	wg.Wait()
	close(got)
	ids, wss := map[string]bool{}, map[string]bool{}
	warm := 0
	for sess := range got {
		if ids[sess.ID] || wss[sess.Workspace] {
			t.Errorf("session %s (workspace %s) handed out twice", sess.ID, sess.Workspace)
		}
		ids[sess.ID], wss[sess.Workspace] = true, true
		if sess.Warm {
			warm++
		}
	}
	if warm > 3 {
		t.Errorf("%d claims hit a pool of 3", warm)
	}
}

// TestRed4ClaimPastAuditQuota: past its audit quota a tenant's new sessions are
// refused (429 audit) until it prunes. A claim from a warm pool is a new session for
// the tenant like any start: it must be refused too, not handed out.
func TestRed4ClaimPastAuditQuota(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServeWith(t, "    pools: [{name: default, size: 1, backend: bwrap}]\n    quotas: {sessions: 4, audit: 1KiB}\n")
	stopPoolAtEnd(t, s)
	serve := filepath.Join(filepath.Dir(s.file), "acme", "run", "serve")
	waitFor(t, 2*time.Minute, "a warm session", func() bool { return len(warmIDs(t, serve)) == 1 })
	acme := s.tcpClient("acme")
	// The warm session's log is past 1 KiB, but the audit root was measured as the
	// warm session started, and that figure is reused for 30 s. A start let through
	// meanwhile is stopped and its run pruned (by root, the tenant's auditor on the
	// unix socket): after a prune the server measures again at the next start.
	auditor := s.unixClient("acme")
	auditor.token = ""
	pruned := 0
	waitFor(t, time.Minute, "a cold start refused at the audit quota", func() bool {
		code, body := acme.call(t, "POST", "/v1/sessions", api.StartRequest{Workspace: "probe"})
		var sess api.Session
		if code == http.StatusCreated && json.Unmarshal([]byte(body), &sess) == nil {
			pruned++
			acme.call(t, "POST", "/v1/sessions/"+sess.ID+"/stop", nil)
			if code, body := auditor.call(t, "POST", "/v1/runs/prune", api.PruneRequest{OlderThan: "1ms"}); code != http.StatusOK {
				t.Fatalf("prune: %d %s", code, body)
			}
		}
		return code == http.StatusTooManyRequests && strings.Contains(body, `"quota":"audit"`)
	})
	t.Logf("cold starts let through (then stopped and pruned) before one was refused: %d", pruned)
	if len(warmIDs(t, serve)) != 1 {
		t.Fatal("no warm session left to claim: the test proves nothing")
	}
	code, body := acme.call(t, "POST", "/v1/sessions", api.StartRequest{})
	if code != http.StatusTooManyRequests || !strings.Contains(body, `"quota":"audit"`) {
		t.Errorf("a claim past the audit quota: %d %s; want 429 audit", code, body)
	}
}
