package api

import "github.com/cordonhq/cordon/gate"

// gateRoutes: the pending gate requests of the tenant's live runs and sessions, for an
// approver. The approver recorded in the log is "tenant/credential".
var gateRoutes = []Route{
	{Method: "GET", Path: "/v1/gates", Role: RoleApprover, Summary: "the pending gate requests of the tenant's live runs, oldest first (cordon gate ls --json)", Response: GateList{}},
	{Method: "GET", Path: "/v1/gates/{id}", Role: RoleApprover, Summary: "one pending request: what it would run and a preview of what it would publish (cordon gate show --json)", Response: GateShow{}},
	{Method: "POST", Path: "/v1/gates/{id}/approve", Role: RoleApprover, Summary: "approve: the operation runs now, on the host; the requester gets its output", Response: GateDecision{}, Held: true},
	{Method: "POST", Path: "/v1/gates/{id}/deny", Role: RoleApprover, Summary: "deny: the requester is told why", Request: DenyRequest{}, Response: GateDecision{}, Held: true},
}

// GateList is GET /v1/gates: `cordon gate ls --json` of the tenant's run root.
type GateList gate.List

// GateShow is GET /v1/gates/{id}: `cordon gate show --json`.
type GateShow gate.Show

// DenyRequest is POST /v1/gates/{id}/deny.
type DenyRequest struct {
	Why string `json:"why,omitempty"` // the reason the requester is told; at most MaxWhy bytes
}

// MaxWhy bounds a denial's reason.
const MaxWhy = 4096

// GateDecision is the answer to approve and deny.
type GateDecision struct {
	ID       string `json:"id"`
	Decision string `json:"decision"` // "approved" or "denied"
	By       string `json:"by"`       // as the log records it: "tenant/credential"
}
