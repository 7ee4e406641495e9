package integration

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
	"github.com/cordonhq/cordon/server/api"
	"github.com/cordonhq/cordon/session/wire"
)

// TestServePoolRestartStopsWarm: a daemon killed with SIGKILL leaves its pool's warm
// sessions running; started again, it stops every one of them and fills the pool
// anew: none is ever handed out after a restart, since a claim's record is written
// unsynced and a record that says warm may be a claim a machine crash lost. That case
// is made by hand here: a claimed session (it ran a command) whose record is put back
// to warm while the daemon is down is stopped too, never claimed again, and stays
// 404. A claimed session whose record says so is adopted as any session. After the
// restart a claim gets a new session in an empty workspace: nothing ran in it before.
func TestServePoolRestartStopsWarm(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServeWith(t, "    pools: [{name: default, size: 2, backend: bwrap}]\n    quotas: {sessions: 5}\n")
	stopPoolAtEnd(t, s)
	serve := filepath.Join(filepath.Dir(s.file), "acme", "run", "serve")
	sessions := filepath.Join(filepath.Dir(serve), "sessions")
	warm := func() []string { return warmIDs(t, serve) }
	waitFor(t, 2*time.Minute, "the pool to hold 2 warm sessions", func() bool { return len(warm()) == 2 })
	s.waitClaimable(t, time.Minute, "acme", "default", 2)
	a := s.tcpClient("acme")
	claim := func() api.Session {
		t.Helper()
		code, body := a.call(t, "POST", "/v1/sessions", api.StartRequest{})
		var sess api.Session
		if code != http.StatusCreated || json.Unmarshal([]byte(body), &sess) != nil || !sess.Warm {
			t.Fatalf("claim: %d %s; want 201, warm", code, body)
		}
		return sess
	}
	kept, lost := claim(), claim()
	for _, sess := range []api.Session{kept, lost} {
		if out, _, last := outcome(t, a.exec(t, sess.ID, "sh", "-c", "echo claimed > f; cat f")); out != "claimed\n" || last.Result == nil || last.Result.ExitCode != 0 {
			t.Fatalf("exec in claimed session %s: %q %+v", sess.ID, out, last)
		}
	}
	waitFor(t, 2*time.Minute, "the pool to refill", func() bool { return len(warm()) == 2 })
	left := warm()

	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-s.done
	for _, id := range left {
		if si, err := wire.Read(sessions, id); err != nil || !si.Alive() {
			t.Fatalf("warm session %s does not run after the daemon's SIGKILL (%v): the test proves nothing", id, err)
		}
	}
	// The claim of lost as a machine crash could undo it: the record says warm again.
	rec := filepath.Join(serve, lost.ID+".json")
	data, err := os.ReadFile(rec)
	var m map[string]any
	if err != nil || json.Unmarshal(data, &m) != nil {
		t.Fatalf("the record of %s: %v %s", lost.ID, err, data)
	}
	m["warm"] = true
	delete(m, "claimed")
	delete(m, "claimed_at")
	data, _ = json.Marshal(m)
	if err := os.WriteFile(rec, data, 0o600); err != nil {
		t.Fatal(err)
	}
	s.launch(t)

	a = s.tcpClient("acme")
	// Answered once the restarted daemon serves: it adopted (and stopped) before.
	if got := a.session(t, kept.ID); got.State != "running" || !got.Warm {
		t.Errorf("the claimed session after the restart: %+v; want it running, the tenant's", got)
	}
	old := append(slices.Clone(left), lost.ID)
	for _, id := range old {
		// Stopped before the daemon serves; its supervisor, which answered the stop
		// once torn down, exits a moment later.
		waitFor(t, 10*time.Second, "session "+id+", warm in its record, to end once the restarted daemon serves", func() bool {
			si, err := wire.Read(sessions, id)
			return err != nil || !si.Alive()
		})
		if code, body := a.call(t, "GET", "/v1/sessions/"+id, nil); code != http.StatusNotFound {
			t.Errorf("GET session %s, warm in its record: %d %s; want 404", id, code, body)
		}
	}
	waitFor(t, 2*time.Minute, "the pool to fill anew", func() bool {
		now := warm()
		return len(now) == 2 && !slices.ContainsFunc(now, func(id string) bool { return slices.Contains(old, id) })
	})
	fresh := claim()
	if slices.Contains(old, fresh.ID) {
		t.Fatalf("a claim after the restart got session %s, left warm by the killed daemon", fresh.ID)
	}
	if out, _, last := outcome(t, a.exec(t, fresh.ID, "sh", "-c", "test -e f && echo ran-before || echo fresh")); out != "fresh\n" || last.Result == nil || last.Result.ExitCode != 0 {
		t.Errorf("the workspace of a session claimed after the restart: %q %+v; want no f in it", out, last)
	}
	if !strings.Contains(s.stderr.String(), "stopped a session a previous server left") {
		t.Errorf("the restarted daemon's log does not say it stopped the warm sessions:\n%s", s.stderr.String())
	}
}

// TestServePoolConcurrentClaims: starts racing for a pool of 2 each get a session of
// their own: never one twice; the pool's sessions are claimed, the rest are cold
// starts (or claims of the refill, on a slow host).
func TestServePoolConcurrentClaims(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServeWith(t, "    pools: [{name: default, size: 2, backend: bwrap}]\n    quotas: {sessions: 6}\n")
	stopPoolAtEnd(t, s)
	serve := filepath.Join(filepath.Dir(s.file), "acme", "run", "serve")
	waitFor(t, 2*time.Minute, "the pool to hold 2 warm sessions", func() bool { return len(warmIDs(t, serve)) == 2 })
	s.waitClaimable(t, time.Minute, "acme", "default", 2)
	pool := warmIDs(t, serve)
	a := s.tcpClient("acme")
	got := make(chan api.Session, 4)
	for range 4 {
		go func() {
			code, body := a.call(t, "POST", "/v1/sessions", api.StartRequest{})
			var sess api.Session
			if code != http.StatusCreated || json.Unmarshal([]byte(body), &sess) != nil {
				t.Errorf("start: %d %s", code, body)
			}
			got <- sess
		}()
	}
	seen := map[string]bool{}
	warm := 0
	for range 4 {
		sess := <-got
		if sess.ID == "" {
			continue
		}
		if seen[sess.ID] {
			t.Errorf("session %s answered to two starts", sess.ID)
		}
		seen[sess.ID] = true
		if sess.Warm && slices.Contains(pool, sess.ID) {
			warm++
		}
	}
	if warm != 2 {
		t.Errorf("%d of 4 racing starts claimed the pool's 2 sessions %v; want both claimed, once each", warm, pool)
	}
}

// TestServePoolGracefulStopDuringRefill: a graceful stop (SIGTERM) that comes while
// the pool's refill is starting a session waits for that start and stops the new
// session with the other unclaimed ones: once the daemon has exited, the only session
// running is the claimed one.
func TestServePoolGracefulStopDuringRefill(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServeWith(t, "    pools: [{name: default, size: 2, backend: bwrap}]\n    quotas: {sessions: 4}\n")
	stopPoolAtEnd(t, s)
	serve := filepath.Join(filepath.Dir(s.file), "acme", "run", "serve")
	sessions := filepath.Join(filepath.Dir(serve), "sessions")
	workspaces := filepath.Join(filepath.Dir(s.file), "acme", "workspaces")
	waitFor(t, 2*time.Minute, "the pool to hold 2 warm sessions", func() bool { return len(warmIDs(t, serve)) == 2 })
	s.waitClaimable(t, time.Minute, "acme", "default", 2)
	before, _ := filepath.Glob(filepath.Join(workspaces, "warm-*"))
	code, body := s.tcpClient("acme").call(t, "POST", "/v1/sessions", api.StartRequest{})
	var claimed api.Session
	if code != http.StatusCreated || json.Unmarshal([]byte(body), &claimed) != nil || !claimed.Warm {
		t.Fatalf("claim: %d %s; want 201, warm", code, body)
	}
	// The refill's start is under way once it made its workspace.
	waitFor(t, time.Minute, "the refill to start a session", func() bool {
		now, _ := filepath.Glob(filepath.Join(workspaces, "warm-*"))
		return len(now) > len(before)
	})
	s.terminate(t)
	// Counted by process, not by record: a start the daemon left half done may run
	// without a record.
	waitFor(t, 10*time.Second, "only the claimed session's supervisor to run", func() bool {
		return supervisorsUnder(sessions) == 1
	})
	if si, err := wire.Read(sessions, claimed.ID); err != nil || !si.Alive() {
		t.Errorf("the claimed session does not run after the daemon's graceful stop (%v)", err)
	}
}

// supervisorsUnder counts the session supervisors whose command line names dir.
func supervisorsUnder(dir string) int {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	n := 0
	for _, p := range procs {
		data, err := os.ReadFile(p)
		args := strings.Split(string(data), "\x00")
		if err == nil && len(args) > 2 && args[1] == "internal" && args[2] == "supervise" && strings.Contains(string(data), dir+"/") {
			n++
		}
	}
	return n
}

// terminate stops the daemon gracefully (SIGTERM) and waits until it has exited.
func (s *served) terminate(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the daemon did not stop within 2 minutes of SIGTERM")
	}
}

// stopPoolAtEnd stops, at the test's end, the daemon gracefully (its unclaimed warm
// sessions with it, and no refill after) and then every session left: stopping the
// sessions first under a live daemon would have its pool start new ones, which its
// kill would then leave running.
func stopPoolAtEnd(t *testing.T, s *served) {
	stopSessionsAtEnd(t, s)
	t.Cleanup(func() { // runs before the one above
		if s.cmd.ProcessState != nil {
			return
		}
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(2 * time.Minute):
			t.Errorf("the daemon did not stop within 2 minutes of SIGTERM")
		}
	})
}
