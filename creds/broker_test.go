package creds_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/creds"
	"github.com/cordonhq/cordon/internal/event"
)

const run = "20300102T150405Z-abcdef"

func TestIssueAndRevoke(t *testing.T) {
	f := newFake(t)
	e := newEnv(t, "", map[string]creds.Provider{"exec": f})
	gs, err := e.broker.IssueAll(context.Background(), run, []contract.Credential{
		cred("A_TOKEN", "exec", 10*time.Minute, map[string]any{"k": "v"}),
		cred("B_TOKEN", "exec", 0, nil),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(gs) != 2 || f.liveCount() != 2 {
		t.Fatalf("got %d grants, %d live; want 2, 2", len(gs), f.liveCount())
	}
	a, b := gs[0], gs[1]
	if a.Run != run || a.Name != "A_TOKEN" || a.Provider != "exec" || a.Deliver != "env" || a.Scope["k"] != "v" {
		t.Errorf("grant fields not filled in: %+v", a)
	}
	if !a.ExpiresAt.Equal(t0.Add(10*time.Minute)) || !b.ExpiresAt.Equal(t0.Add(creds.DefaultTTL)) {
		t.Errorf("expiries %v, %v; want ttl and DefaultTTL after %v", a.ExpiresAt, b.ExpiresAt, t0)
	}
	if want := creds.Fingerprint(a.Secret.Reveal()); a.ID != want {
		t.Errorf("ID %q; want %q", a.ID, want)
	}
	if e.redacted["A_TOKEN"] != a.Secret.Reveal() || e.redacted["B_TOKEN"] != b.Secret.Reveal() {
		t.Errorf("values not registered with the redactor: %v", e.redacted)
	}
	if files := ledgerFiles(t, e.root); len(files) != 2 {
		t.Errorf("ledger holds %v; want 2 records", files)
	}
	for _, p := range ledgerFiles(t, e.root) {
		st, _ := os.Stat(filepath.Join(e.root, p))
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v; want 0600", p, st.Mode())
		}
	}
	st, _ := os.Stat(e.root)
	if st.Mode().Perm() != 0o700 {
		t.Errorf("ledger root has mode %v; want 0700", st.Mode())
	}
	if ledger := readAll(t, e.root); strings.Contains(ledger, a.Secret.Reveal()) || strings.Contains(ledger, b.Secret.Reveal()) {
		t.Errorf("the ledger stores a value:\n%s", ledger)
	}

	if err := e.broker.RevokeAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if f.liveCount() != 0 {
		t.Errorf("%d grants still live after RevokeAll", f.liveCount())
	}
	if files := ledgerFiles(t, e.root); len(files) != 0 {
		t.Errorf("ledger still holds %v", files)
	}
	revs := e.events.revokes()
	if len(revs) != 2 || revs[0].Outcome != creds.Revoked || revs[0].Attempts != 1 || revs[0].Reason != "run ended" {
		t.Errorf("revoke events %+v", revs)
	}
	// Idempotent: nothing left to revoke.
	calls := f.revokes
	if err := e.broker.RevokeAll(context.Background()); err != nil || f.revokes != calls {
		t.Errorf("second RevokeAll: err %v, %d more Revoke calls", err, f.revokes-calls)
	}
}

func TestIssueFailureRevokesThoseIssued(t *testing.T) {
	good, bad := newFake(t), newFake(t)
	bad.issueErr = errors.New("issuer said no")
	e := newEnv(t, "", map[string]creds.Provider{"exec": good, "vault": bad})
	_, err := e.broker.IssueAll(context.Background(), run, []contract.Credential{
		cred("FIRST", "exec", time.Minute, nil),
		cred("SECOND", "exec", time.Minute, nil),
		cred("THIRD", "vault", time.Minute, nil),
		cred("NEVER", "exec", time.Minute, nil),
	})
	var ie *creds.IssueError
	if !errors.As(err, &ie) || ie.Name != "THIRD" || ie.Provider != "vault" {
		t.Fatalf("error %v; want an IssueError naming THIRD", err)
	}
	if !strings.Contains(err.Error(), "THIRD") || !strings.Contains(err.Error(), "issuer said no") {
		t.Errorf("message %q does not name the credential and the cause", err)
	}
	if good.liveCount() != 0 {
		t.Errorf("%d grants issued before the failure are still live", good.liveCount())
	}
	if files := ledgerFiles(t, e.root); len(files) != 0 {
		t.Errorf("ledger still holds %v", files)
	}
	revs := e.events.revokes()
	if len(revs) != 2 || !strings.HasPrefix(revs[0].Reason, "rollback: THIRD") {
		t.Errorf("revoke events %+v; want FIRST and SECOND rolled back", revs)
	}
	if _, ok := e.redacted["NEVER"]; ok {
		t.Error("a credential after the failure was issued")
	}
}

func TestIssueRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    func(*creds.Config)
		creds  []contract.Credential
		target error
		msg    string
	}{
		{name: "no provider", creds: []contract.Credential{cred("X", "github-app", 0, nil)}, target: creds.ErrNoProvider, msg: "X (github-app)"},
		{name: "no redactor", cfg: func(c *creds.Config) { c.Redact = nil }, creds: []contract.Credential{cred("X", "exec", 0, nil)}, msg: "redactor"},
		{name: "redactor refuses", cfg: func(c *creds.Config) {
			c.Redact = func(string, string) error { return errors.New("value too short") }
		}, creds: []contract.Credential{cred("X", "exec", 0, nil)}, msg: "value too short"},
		{name: "duplicate", creds: []contract.Credential{cred("X", "exec", 0, nil), cred("X", "exec", 0, nil)}, msg: "declared twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			cfg := creds.Config{
				Root: filepath.Join(t.TempDir(), "l"), Providers: map[string]creds.Provider{"exec": f},
				Redact: func(string, string) error { return nil }, Alerts: &syncWriter{w: nil},
			}
			creds.FastRetry(&cfg)
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			b, err := creds.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			_, err = b.IssueAll(context.Background(), run, tc.creds)
			if err == nil || (tc.target != nil && !errors.Is(err, tc.target)) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err %v; want %v containing %q", err, tc.target, tc.msg)
			}
			if f.liveCount() != 0 {
				t.Errorf("%d left live", f.liveCount())
			}
			if files := ledgerFiles(t, cfg.Root); len(files) != 0 {
				t.Errorf("ledger holds %v", files)
			}
		})
	}
}

func TestRevokeRetriedThenAlert(t *testing.T) {
	f := newFake(t)
	e := newEnv(t, "", map[string]creds.Provider{"exec": f})
	gs, err := e.broker.IssueAll(context.Background(), run, []contract.Credential{cred("TOK", "exec", time.Hour, nil)})
	if err != nil {
		t.Fatal(err)
	}
	f.setRevokeFails(-1)
	err = e.broker.RevokeAll(context.Background())
	if !errors.Is(err, creds.ErrNotRevoked) || !strings.Contains(err.Error(), "TOK") {
		t.Fatalf("err %v; want ErrNotRevoked naming TOK", err)
	}
	if f.revokes != 4 {
		t.Errorf("%d attempts; want 4", f.revokes)
	}
	revs := e.events.revokes()
	if len(revs) != 1 || revs[0].Outcome != creds.Failed || !revs[0].Alert || revs[0].Attempts != 4 || revs[0].Error == "" {
		t.Errorf("revoke event %+v; want a failed alert after 4 attempts", revs)
	}
	if a := e.alerts.String(); !strings.Contains(a, "ALERT") || !strings.Contains(a, "TOK") || !strings.Contains(a, "NOT revoked") || strings.Contains(a, gs[0].Secret.Reveal()) {
		t.Errorf("alert printed: %q", a)
	}
	if files := ledgerFiles(t, e.root); len(files) != 1 {
		t.Errorf("ledger holds %v; the unrevoked grant must stay for gc", files)
	}
	// A second call retries what failed.
	f.setRevokeFails(0)
	if err := e.broker.RevokeAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if f.liveCount() != 0 || len(ledgerFiles(t, e.root)) != 0 {
		t.Error("the retried revocation did not clear the grant")
	}
}

func TestRevokeRetrySucceeds(t *testing.T) {
	f := newFake(t)
	e := newEnv(t, "", map[string]creds.Provider{"exec": f})
	if _, err := e.broker.IssueAll(context.Background(), run, []contract.Credential{cred("TOK", "exec", time.Hour, nil)}); err != nil {
		t.Fatal(err)
	}
	f.setRevokeFails(2)
	if err := e.broker.RevokeAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if revs := e.events.revokes(); len(revs) != 1 || revs[0].Outcome != creds.Revoked || revs[0].Attempts != 3 || revs[0].Alert {
		t.Errorf("revoke events %+v; want revoked on the third attempt", revs)
	}
	if e.alerts.Len() != 0 {
		t.Errorf("alert printed for a revocation that succeeded: %s", e.alerts)
	}
}

// Near expiry: a revocation that fails one second before the recorded expiry (plus
// the grace for the issuer's clock) is an alert; one second after, the credential is
// dead anyway and the record goes.
func TestRevokeFailureNearExpiry(t *testing.T) {
	for _, tc := range []struct {
		name    string
		at      time.Duration // after issue
		outcome string
	}{
		{"before expiry", time.Hour + creds.ExpiryGrace - time.Second, creds.Failed},
		{"after expiry", time.Hour + creds.ExpiryGrace + time.Second, creds.Expired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			e := newEnv(t, "", map[string]creds.Provider{"exec": f})
			if _, err := e.broker.IssueAll(context.Background(), run, []contract.Credential{cred("TOK", "exec", time.Hour, nil)}); err != nil {
				t.Fatal(err)
			}
			f.setRevokeFails(-1)
			e.clock.Set(t0.Add(tc.at))
			err := e.broker.RevokeAll(context.Background())
			revs := e.events.revokes()
			if len(revs) != 1 || revs[0].Outcome != tc.outcome {
				t.Fatalf("revoke events %+v; want outcome %s", revs, tc.outcome)
			}
			expired := tc.outcome == creds.Expired
			if (err == nil) != expired || revs[0].Alert == expired || (e.alerts.Len() == 0) != expired {
				t.Errorf("err %v, alert %v, printed %q", err, revs[0].Alert, e.alerts)
			}
			if n := len(ledgerFiles(t, e.root)); (n == 0) != expired {
				t.Errorf("%d ledger records left", n)
			}
		})
	}
}

func TestRevokeAllSurvivesCancellation(t *testing.T) {
	f := newFake(t)
	e := newEnv(t, "", map[string]creds.Provider{"exec": f})
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := e.broker.IssueAll(ctx, run, []contract.Credential{cred("TOK", "exec", time.Hour, nil)}); err != nil {
		t.Fatal(err)
	}
	cancel() // SIGINT/SIGTERM cancel the run's context before teardown
	if err := e.broker.RevokeAll(ctx); err != nil {
		t.Fatal(err)
	}
	if f.liveCount() != 0 {
		t.Error("RevokeAll gave up on a cancelled context")
	}
}

func TestRevokeOnPanic(t *testing.T) {
	f := newFake(t)
	e := newEnv(t, "", map[string]creds.Provider{"exec": f})
	func() {
		defer func() { recover() }()
		defer e.broker.RevokeAll(context.Background())
		if _, err := e.broker.IssueAll(context.Background(), run, []contract.Credential{cred("TOK", "exec", time.Hour, nil)}); err != nil {
			t.Fatal(err)
		}
		panic("the runner has a bug")
	}()
	if f.liveCount() != 0 {
		t.Error("a panic left the credential live")
	}
}

// A panic inside a provider's Issue (the closest a test gets to cordon dying while
// issuing) leaves a pending record without a revoke reference. gc reports it as
// unrevocable until it expires, then drops it.
func TestPendingRecordAfterCrashDuringIssue(t *testing.T) {
	f := newFake(t)
	f.panicIssue = true
	e := newEnv(t, "", map[string]creds.Provider{"exec": f})
	func() {
		defer func() { recover() }()
		e.broker.IssueAll(context.Background(), run, []contract.Credential{cred("TOK", "exec", time.Hour, nil)})
	}()
	if files := ledgerFiles(t, e.root); len(files) != 1 {
		t.Fatalf("ledger holds %v; want the pending record", files)
	}
	gc := newEnv(t, e.root, map[string]creds.Provider{"exec": f})
	out, err := gc.broker.Reconcile(context.Background(), func(string) bool { return false })
	if !errors.Is(err, creds.ErrNotRevoked) || len(out) != 1 || out[0].Result != creds.Failed || !errors.Is(out[0].Err, creds.ErrNoRevokeRef) {
		t.Fatalf("Reconcile: %+v, %v; want a failure for want of a revoke reference", out, err)
	}
	gc.clock.Set(t0.Add(time.Hour + creds.ExpiryGrace))
	out, err = gc.broker.Reconcile(context.Background(), func(string) bool { return false })
	if err != nil || len(out) != 1 || out[0].Result != creds.Expired {
		t.Fatalf("Reconcile after expiry: %+v, %v", out, err)
	}
	if files := ledgerFiles(t, e.root); len(files) != 0 {
		t.Errorf("ledger holds %v after expiry", files)
	}
}

func TestReconcileSkipsLiveRuns(t *testing.T) {
	f := newFake(t)
	e := newEnv(t, "", map[string]creds.Provider{"exec": f})
	if _, err := e.broker.IssueAll(context.Background(), run, []contract.Credential{cred("TOK", "exec", time.Hour, nil)}); err != nil {
		t.Fatal(err)
	}
	// The broker's own run is never touched, whatever the predicate says.
	if out, err := e.broker.Reconcile(context.Background(), func(string) bool { return false }); err != nil || len(out) != 0 {
		t.Errorf("own run reconciled: %+v, %v", out, err)
	}
	// Another broker: this process issued the grant and is alive.
	gc := newEnv(t, e.root, map[string]creds.Provider{"exec": f})
	if out, err := gc.broker.Reconcile(context.Background(), nil); err != nil || len(out) != 0 {
		t.Errorf("live run reconciled: %+v, %v", out, err)
	}
	if f.liveCount() != 1 {
		t.Error("a live run's credential was revoked")
	}
}

func TestReconcileWithoutProvider(t *testing.T) {
	f := newFake(t)
	e := newEnv(t, "", map[string]creds.Provider{"vault": f})
	if _, err := e.broker.IssueAll(context.Background(), run, []contract.Credential{cred("TOK", "vault", time.Hour, nil)}); err != nil {
		t.Fatal(err)
	}
	gc := newEnv(t, e.root, map[string]creds.Provider{})
	out, err := gc.broker.Reconcile(context.Background(), func(string) bool { return false })
	if !errors.Is(err, creds.ErrNoProvider) || len(out) != 1 || out[0].Result != creds.Failed {
		t.Fatalf("%+v, %v; want a failure naming the missing provider", out, err)
	}
	if !strings.Contains(gc.alerts.String(), "TOK") {
		t.Errorf("no alert printed: %q", gc.alerts)
	}
	if len(ledgerFiles(t, e.root)) != 1 {
		t.Error("the record was dropped although nothing revoked it")
	}
}

func TestEventsCarryNoValues(t *testing.T) {
	f := newFake(t)
	e := newEnv(t, "", map[string]creds.Provider{"exec": f})
	gs, err := e.broker.IssueAll(context.Background(), run, []contract.Credential{
		cred("A_TOKEN", "exec", time.Hour, map[string]any{"scopes": []any{"read"}}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.broker.RevokeAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	log := e.events.all()
	if strings.Contains(log, gs[0].Secret.Reveal()) {
		t.Fatalf("an event holds the value:\n%s", log)
	}
	issue := e.events.events[0]
	body, ok := issue.Body.(event.CredIssueBody)
	if issue.Type != event.CredIssue || !ok {
		t.Fatalf("first event %+v", issue)
	}
	want := event.CredIssueBody{
		Name: "A_TOKEN", Provider: "exec", ID: gs[0].ID, Deliver: "env", Scope: map[string]any{"scopes": []any{"read"}},
		TTLSec: 3600, Expires: "2030-01-02T16:04:05Z", Reason: "test A_TOKEN",
	}
	if body.Name != want.Name || body.ID != want.ID || body.TTLSec != want.TTLSec || body.Expires != want.Expires || body.Reason != want.Reason || body.Deliver != want.Deliver {
		t.Errorf("cred.issue body %+v; want %+v", body, want)
	}
	for _, key := range []string{`"name":"A_TOKEN"`, `"id":"sha256:`, `"expires":"2030-01-02T16:04:05Z"`, `"scope":{"scopes":["read"]}`, `"outcome":"revoked"`} {
		if !strings.Contains(log, key) {
			t.Errorf("events lack %s:\n%s", key, log)
		}
	}
}

func TestOneBrokerPerRun(t *testing.T) {
	e := newEnv(t, "", map[string]creds.Provider{"exec": newFake(t)})
	if _, err := e.broker.IssueAll(context.Background(), run, []contract.Credential{cred("A", "exec", 0, nil)}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.broker.IssueAll(context.Background(), "other-run", []contract.Credential{cred("B", "exec", 0, nil)}); err == nil {
		t.Error("a broker issued for a second run")
	}
	if _, err := e.broker.IssueAll(context.Background(), "../escape", nil); err == nil {
		t.Error("a run id with a slash was accepted")
	}
}

func TestLedgerRootMustBePrivate(t *testing.T) {
	root := filepath.Join(t.TempDir(), "ledger")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(root, 0o777)
	_, err := creds.New(creds.Config{Root: root})
	if !errors.Is(err, creds.ErrLedger) {
		t.Fatalf("New on a world-writable root: %v; want ErrLedger", err)
	}
}

// A provider that returns no expiry is refused, and its grant revoked; were that to
// fail, the ttl asked for would stand as its expiry, never "already expired".
func TestProviderWithoutExpiry(t *testing.T) {
	f := newFake(t)
	e := newEnv(t, "", map[string]creds.Provider{"exec": noExpiry{f}})
	f.setRevokeFails(-1)
	_, err := e.broker.IssueAll(context.Background(), run, []contract.Credential{cred("TOK", "exec", time.Hour, nil)})
	if err == nil || !strings.Contains(err.Error(), "no expiry") || !errors.Is(err, creds.ErrNotRevoked) {
		t.Fatalf("err %v", err)
	}
	if revs := e.events.revokes(); len(revs) != 1 || revs[0].Outcome != creds.Failed || revs[0].Expires != "2030-01-02T16:04:05Z" {
		t.Errorf("revoke events %+v", revs)
	}
}

type noExpiry struct{ *fakeProvider }

func (n noExpiry) Issue(ctx context.Context, a creds.IssueArgs) (creds.Grant, error) {
	g, err := n.fakeProvider.Issue(ctx, a)
	g.ExpiresAt = time.Time{}
	return g, err
}
