package creds

import (
	"time"

	"github.com/cordonhq/cordon/contract"
)

// IssueEvent is the body of the [event.CredIssue] event, one per credential issued.
// It never holds a value. Field names are part of the audit schema (docs/audit.md).
type IssueEvent struct {
	Name     string           `json:"name"`     // the contract's name, as in "[REDACTED:NAME]"
	Provider string           `json:"provider"` // local, exec, github-app, vault
	ID       string           `json:"id"`       // see [Grant.ID]; safe to show
	Deliver  contract.Deliver `json:"deliver"`  // env, file or proxy
	Scope    map[string]any   `json:"scope,omitempty"`
	TTLSec   int64            `json:"ttl_s"`   // the ttl the contract asked for
	Expires  string           `json:"expires"` // RFC 3339, as the issuer reported it
	Reason   string           `json:"reason,omitempty"`
}

// Outcomes of a revocation ([RevokeEvent.Outcome], [Outcome.Result]).
const (
	Revoked = "revoked" // the issuer confirmed it (or it was already gone)
	Expired = "expired" // revocation failed, but the credential had expired anyway
	Failed  = "failed"  // still valid until it expires: an alert
	Skipped = "skipped" // reconcile only: its run's cordon is still running
)

// RevokeEvent is the body of the [event.CredRevoke] event, one per grant the run
// revoked or failed to revoke. A failure has Outcome "failed" and Alert set.
type RevokeEvent struct {
	Name     string `json:"name"`
	Provider string `json:"provider"`
	ID       string `json:"id"`
	Outcome  string `json:"outcome"` // revoked, expired or failed
	Attempts int    `json:"attempts"`
	Expires  string `json:"expires"`
	Error    string `json:"error,omitempty"`
	Alert    bool   `json:"alert,omitempty"`  // the credential outlives the run
	Reason   string `json:"reason,omitempty"` // why it was revoked: run ended, rollback…
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// Log field keys.
const (
	logKeyRun      = "run"
	logKeyName     = "credential"
	logKeyProvider = "provider"
	logKeyID       = "id"
	logKeyExpires  = "expires"
	logKeyAttempts = "attempts"
	logKeyOutcome  = "outcome"
	logKeyErr      = "err"
)
