package server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/runner"
)

// deadSession makes, in the test server's tenant acme, the record of a session whose
// supervisor is gone (it published nothing) and its log, cut before its seal as a
// killed supervisor leaves it. It returns the tenant's places and the log's path.
func deadSession(t *testing.T, s *Server, charge bool) (tenantRoots, sessionRecord, string) {
	t.Helper()
	if !filepath.IsAbs(s.cfg.Tenants[0].Root) || !strings.HasPrefix(s.cfg.Tenants[0].Root, os.TempDir()) {
		s.cfg.Tenants[0].Root = filepath.Join(t.TempDir(), "acme") // the first one's
	}
	roots := tenantRootsOf(s.cfg.Tenants[0])
	if err := makeTenantDirs(roots, roots.workspace("w")); err != nil {
		t.Fatal(err)
	}
	id := audit.NewRunID(time.Now())
	w, err := audit.Create(roots.t.AuditRoot(), id, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.StartCmd(audit.CmdStart{Argv: []string{"sleep", "600"}}); err != nil {
		t.Fatal(err)
	}
	rec := sessionRecord{ID: id, Workspace: "w", Backend: "bwrap", Started: time.Now(), Charge: leastSession}
	if err := writeRecord(roots, rec); err != nil {
		t.Fatal(err)
	}
	if charge {
		release, err := s.quota.Adopt("acme", rec.Charge, rec.Started)
		if err != nil {
			t.Fatal(err)
		}
		s.hold(roots.t, rec, release)
	}
	return roots, rec, w.Path()
}

// TestDeadSessionIsCollected: a session found with its supervisor dead, when the
// server restarts (adoption) or in the reaper's pass, has cordon gc run on its
// tenant's run root, its log sealed with the reason, its charge given back, and its
// record (and the API) say it is dead, and why; once.
func TestDeadSessionIsCollected(t *testing.T) {
	for _, how := range []string{"adoption", "reaper"} {
		t.Run(how, func(t *testing.T) {
			s, _ := testServer(t)
			var logs bytes.Buffer
			s.log = slog.New(slog.NewJSONHandler(&logs, nil))
			var gcs []string
			s.gcCmd = func(_ context.Context, r tenantRoots) { gcs = append(gcs, r.run.String()) }
			s.live = func(paths.Root, string) bool { return false }
			roots, rec, events := deadSession(t, s, how == "reaper")
			switch how {
			case "adoption":
				_, other, otherEvents := deadSession(t, s, false)
				s.adoptSessions(context.Background())
				if rep, err := audit.Verify(otherEvents); err != nil || !rep.Sealed {
					t.Errorf("the other dead session's log: %v; want it sealed", err)
				}
				if got, _ := readRecord(roots, other.ID); got.Ended != endedDied {
					t.Errorf("the other dead session: %+v; want it collected", got)
				}
			case "reaper":
				s.reapOne(context.Background(), hold{tenant: roots.t, id: rec.ID, started: rec.Started})
			}
			if len(gcs) != 1 || gcs[0] != roots.run.String() {
				t.Errorf("cordon gc ran on %v; want once on %s (once for every dead session)", gcs, roots.run)
			}
			rep, err := audit.Verify(events)
			if err != nil || !rep.Sealed {
				t.Fatalf("the log: %+v, %v; want it sealed", rep, err)
			}
			data, _ := os.ReadFile(events)
			if !strings.Contains(string(data), runner.AbandonedDetail) {
				t.Errorf("the seal does not say why:\n%s", data)
			}
			got, err := readRecord(roots, rec.ID)
			if err != nil || got.Ended != endedDied || state(roots, got) != stateDead {
				t.Errorf("record: %+v, %v; want ended %q, dead", got, err, endedDied)
			}
			if n := (liveSessions{s}).Sessions()["acme"]; n != 0 {
				t.Errorf("%d sessions still charged", n)
			}
			if !strings.Contains(logs.String(), `"msg":"session died; log sealed"`) || !strings.Contains(logs.String(), `"session":"`+rec.ID+`"`) {
				t.Errorf("no log of the seal:\n%s", logs.String())
			}
			want := map[string]string{"adoption": "2", "reaper": "1"}[how]
			if m := scrape(t, s); !hasLine(m, `cordon_dead_sessions_total{result="sealed",tenant="acme"} `+want) {
				t.Errorf("the seal is not counted:\n%s", m)
			}
			// Once: a second pass finds it collected.
			s.adoptSessions(context.Background())
			if len(gcs) != 1 {
				t.Errorf("collected again: gc ran %d times", len(gcs))
			}
			if rep2, _ := audit.Verify(events); rep2.Lines != rep.Lines {
				t.Errorf("the log grew from %d to %d lines", rep.Lines, rep2.Lines)
			}
		})
	}
}

// TestDeadSessionWithAnEditedLog: a dead session whose log does not verify is never
// sealed over; its record says why, and the failure is counted.
func TestDeadSessionWithAnEditedLog(t *testing.T) {
	s, _ := testServer(t)
	s.gcCmd = func(context.Context, tenantRoots) {}
	s.live = func(paths.Root, string) bool { return false }
	roots, rec, events := deadSession(t, s, false)
	data, _ := os.ReadFile(events)
	edited := bytes.Replace(data, []byte(`"sleep"`), []byte(`"sheep"`), 1)
	if err := os.WriteFile(events, edited, 0o600); err != nil {
		t.Fatal(err)
	}
	s.adoptSessions(context.Background())
	if after, _ := os.ReadFile(events); !bytes.Equal(after, edited) {
		t.Error("an edited log was extended")
	}
	got, _ := readRecord(roots, rec.ID)
	if !strings.HasPrefix(got.Ended, endedUnsealed) || state(roots, got) != stateDead {
		t.Errorf("record: %+v; want dead, ended %q...", got, endedUnsealed)
	}
	if m := scrape(t, s); !hasLine(m, `cordon_dead_sessions_total{result="failed",tenant="acme"} 1`) {
		t.Errorf("the failure is not counted:\n%s", m)
	}
}

// TestStopADeadSession: stopping a dead session not collected yet collects it first:
// its log is sealed before it is marked stopped.
func TestStopADeadSession(t *testing.T) {
	s, tok := testServer(t)
	s.gcCmd = func(context.Context, tenantRoots) {}
	s.live = func(paths.Root, string) bool { return false }
	roots, rec, events := deadSession(t, s, true)
	hs := httptest.NewServer(s.routes()) // a real connection: the stop lifts its deadlines
	defer hs.Close()
	r, _ := http.NewRequest("POST", hs.URL+"/v1/sessions/"+rec.ID+"/stop", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	resp, err := hs.Client().Do(r)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"state":"stopped"`) || !strings.Contains(string(body), `"ended":`) {
		t.Errorf("stop: %d %s; want 200, stopped, ended", resp.StatusCode, body)
	}
	if rep, err := audit.Verify(events); err != nil || !rep.Sealed {
		t.Errorf("the log: %v; want it sealed", err)
	}
	if got, _ := readRecord(roots, rec.ID); !got.Stopped {
		t.Errorf("record: %+v; want stopped", got)
	}
}
