package event

// CredIssueBody is the body of cred.issue, which the credential broker emits once per
// credential issued. It never holds a value.
type CredIssueBody struct {
	Name     string `json:"name"`     // the contract's name, as in "[REDACTED:NAME]"
	Provider string `json:"provider"` // local, exec, github-app, vault
	ID       string `json:"id"`       // the provider's safe identifier, or "sha256:" + 16 hex digits of the value's hash
	Deliver  string `json:"deliver"`  // env, file, proxy or gate
	// Scope is the scope the contract declared for the credential, as it wrote it.
	Scope   map[string]any `json:"scope,omitempty"`
	TTLSec  int64          `json:"ttl_s"`            // the ttl the contract asked for, seconds
	Expires string         `json:"expires"`          // RFC 3339, as the issuer reported it
	Reason  string         `json:"reason,omitempty"` // the contract's why
}

// CredRevokeBody is the body of cred.revoke, which the broker emits once per grant it
// revoked or failed to revoke. A failure has Outcome "failed" and Alert set.
type CredRevokeBody struct {
	Name     string `json:"name"`     // as in [CredIssueBody]
	Provider string `json:"provider"` // as in [CredIssueBody]
	ID       string `json:"id"`       // as in [CredIssueBody]
	// Outcome is "revoked", "expired" (revocation failed, but the credential had
	// expired anyway) or "failed" (still valid until it expires).
	Outcome  string `json:"outcome"`
	Attempts int    `json:"attempts"`         // revocation attempts made
	Expires  string `json:"expires"`          // RFC 3339: when it stops being valid anyway
	Error    string `json:"error,omitempty"`  // why the last attempt failed
	Alert    bool   `json:"alert,omitempty"`  // the credential outlives the run
	Reason   string `json:"reason,omitempty"` // why it was revoked: run ended, rollback…
}
