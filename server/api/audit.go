package api

import "github.com/cordonhq/cordon/audit"

// auditRoutes: the runs of the tenant's audit root, for an auditor. {id} is a run id
// (a session's id is its run's).
var auditRoutes = []Route{
	{Method: "GET", Path: "/v1/runs", Role: RoleAuditor, Summary: "the tenant's runs, newest first (cordon audit ls --json)", Response: RunList{}},
	{Method: "GET", Path: "/v1/runs/{id}", Role: RoleAuditor, Summary: "a run's events (cordon audit show --json); a log past 32 MiB is 409 (export streams it)", Response: RunShow{}, Conflict: true},
	{Method: "GET", Path: "/v1/runs/{id}/verify", Role: RoleAuditor, Summary: "check a run's hash chain and seal (cordon audit verify --json)", Response: RunVerify{}},
	{Method: "GET", Path: "/v1/runs/{id}/export", Role: RoleAuditor, Summary: "the verified log, ?format=jsonl (its lines as they are) or ocsf (OCSF events); a log that does not verify is 409", Response: audit.Record{}, Stream: true, Conflict: true},
	{Method: "GET", Path: "/v1/runs/{id}/follow", Role: RoleAuditor, Summary: "a run's lines as they are logged, each verified first, until its seal (?format=jsonl|ocsf)", Response: audit.Record{}, Stream: true, Conflict: true},
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
