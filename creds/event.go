package creds

import "time"

// Outcomes of a revocation (the outcome of a cred.revoke event, [Outcome.Result]).
const (
	Revoked = "revoked" // the issuer confirmed it (or it was already gone)
	Expired = "expired" // revocation failed, but the credential had expired anyway
	Failed  = "failed"  // still valid until it expires: an alert
	Skipped = "skipped" // reconcile only: its run's cordon is still running
)

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
