package api

import (
	"time"

	"github.com/cordonhq/cordon/audit"
)

// auditRoutes: the runs of the tenant's audit root, for an auditor. {id} is a run id
// (a session's id is its run's).
var auditRoutes = []Route{
	{Method: "GET", Path: "/v1/runs", Role: RoleAuditor, Summary: "the tenant's runs, newest first (cordon audit ls --json)", Response: RunList{}},
	{Method: "GET", Path: "/v1/runs/{id}", Role: RoleAuditor, Summary: "a run's events (cordon audit show --json); a log past 32 MiB is 409 (export streams it)", Response: RunShow{}, Conflict: true, Held: true},
	{Method: "GET", Path: "/v1/runs/{id}/verify", Role: RoleAuditor, Summary: "check a run's hash chain and seal (cordon audit verify --json)", Response: RunVerify{}, Held: true},
	{Method: "GET", Path: "/v1/runs/{id}/export", Role: RoleAuditor, Summary: "the verified log, ?format=jsonl (its lines as they are) or ocsf (OCSF events); a log that does not verify is 409", Response: audit.Record{}, Stream: true, Conflict: true},
	{Method: "GET", Path: "/v1/runs/{id}/follow", Role: RoleAuditor, Summary: "a run's lines as they are logged, each verified first, until its seal (?format=jsonl|ocsf)", Response: audit.Record{}, Stream: true, Conflict: true},
	{Method: "POST", Path: "/v1/runs/prune", Role: RoleAuditor, Summary: "remove the tenant's sealed, intact runs older than older_than or past the keep newest of each workspace, each recorded in the audit root's prune record (cordon audit prune)", Request: PruneRequest{}, Response: PruneResult{}, Held: true},
}

// PruneRequest is POST /v1/runs/prune: `cordon audit prune`'s flags. At least one of
// OlderThan and Keep; with both, a run goes only when both allow it.
type PruneRequest struct {
	OlderThan string `json:"older_than,omitempty"` // a Go duration ("72h") or days ("30d"), > 0
	Keep      int    `json:"keep,omitempty"`       // the newest runs of each workspace kept, >= 1
	DryRun    bool   `json:"dry_run,omitempty"`    // say what would go, remove nothing
}

// PruneResult is what a prune removed (or would), newest first, and the runs its rules
// named that it kept because they are not sealed and intact (live, crashed, tampered).
// A run's workspace is its name in the tenant's workspaces ("" when the log names
// none, or one elsewhere).
type PruneResult struct {
	Removed []PrunedRun `json:"removed"`
	Kept    []KeptRun   `json:"kept"`
}

// PrunedRun is one run removed.
type PrunedRun struct {
	Run       string    `json:"run"`
	Workspace string    `json:"workspace"`
	Started   time.Time `json:"started"`
	Ended     time.Time `json:"ended"`
	Lines     int       `json:"lines"`
	Head      string    `json:"head"` // the hash of its last line: a copy kept elsewhere is of this log
}

// KeptRun is a run a prune's rules named, kept, and why.
type KeptRun struct {
	Run string `json:"run"`
	Why string `json:"why"`
}

// RunList is GET /v1/runs: `cordon audit ls --json` of the tenant's audit root.
type RunList audit.Listing

// RunShow is GET /v1/runs/{id}: `cordon audit show --json`.
type RunShow audit.Shown

// RunVerify is GET /v1/runs/{id}/verify: `cordon audit verify --json`. A log that
// does not verify is a 200 with ok false and the problem.
type RunVerify audit.Verified

// Formats of export and follow (?format=; jsonl when absent).
const (
	FormatJSONL = audit.FormatJSONL
	FormatOCSF  = audit.FormatOCSF
)
