package creds_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/creds"
	"github.com/cordonhq/cordon/creds/local"
	"github.com/cordonhq/cordon/internal/event"
)

// Wired as the runner wires it, with the real audit writer: every issued value is
// redacted from everything the log stores, including output and errors that quote it,
// and the cred.* lines carry ids and expiry, never values.
func TestAuditLogNeverHoldsAValue(t *testing.T) {
	dir := t.TempDir()
	runID := audit.NewRunID(time.Now())
	w, err := audit.Create(filepath.Join(dir, "audit"), runID, audit.Options{Start: audit.RunStart{Backend: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	lp, _ := local.New(filepath.Join(dir, "ledger"))
	fake := newFake(t)
	b, err := creds.New(creds.Config{
		Root: filepath.Join(dir, "ledger"), Providers: map[string]creds.Provider{"local": lp, "exec": fake},
		Redact: w.Redactor().Add, Events: w,
	})
	if err != nil {
		t.Fatal(err)
	}
	gs, err := b.IssueAll(context.Background(), runID, []contract.Credential{
		cred("SVC_TOKEN", "local", time.Hour, map[string]any{"scopes": []any{"read"}}),
		cred("CI_TOKEN", "exec", time.Hour, nil),
	})
	if err != nil {
		t.Fatal(err)
	}
	// The sandboxed command prints its credentials, as a careless one would.
	w.Emit(event.Event{Type: event.CmdEnd, Body: map[string]any{
		"stdout": "token is " + gs[0].Secret.Reveal(), "error": "401 for " + gs[1].Secret.Reveal(),
	}})
	if err := b.RevokeAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(audit.RunEnd{Reason: audit.ReasonExited}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	log := string(data)
	for _, g := range gs {
		if strings.Contains(log, g.Secret.Reveal()) {
			t.Errorf("the log holds the value of %s", g.Name)
		}
		if !strings.Contains(log, `"id":"`+g.ID+`"`) {
			t.Errorf("the log lacks %s's id", g.Name)
		}
	}
	for _, want := range []string{"[REDACTED:SVC_TOKEN]", "[REDACTED:CI_TOKEN]", `"type":"cred.issue"`, `"type":"cred.revoke"`, `"outcome":"revoked"`} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %s:\n%s", want, log)
		}
	}
	if _, err := audit.Verify(w.Path()); err != nil {
		t.Errorf("audit.Verify: %v", err)
	}
}
