package api

// stageRoutes: the staged changes of the tenant's runs (a staged session's, once it
// has stopped: its id is its run's), for an approver. Applying lands what a sandbox
// wrote on the tenant's workspace, outside any sandbox: it is the review of the
// agent's work, as a gate's approval is, so the credential an agent runs with cannot
// land its own changes. Discarding is the other outcome of that review, so it is the
// approver's too (an agent undoes its own work in the session, with rollback). The
// log records who did either as "tenant/credential".
var stageRoutes = []Route{
	{Method: "POST", Path: "/v1/runs/{id}/apply", Role: RoleApprover, Summary: "land a staged run's changes on its workspace (cordon apply); a conflict is 409 with the paths", Request: ApplyRequest{}, Response: StageResult{}, Conflict: true, Held: true},
	{Method: "POST", Path: "/v1/runs/{id}/discard", Role: RoleApprover, Summary: "drop a staged run's changes (cordon discard)", Response: StageResult{}, Conflict: true, Held: true},
}

// ApplyRequest is POST /v1/runs/{id}/apply.
type ApplyRequest struct {
	// Paths are workspace-relative paths: only the changes at or below them land; none
	// for all. At most MaxApplyPaths, each at most MaxApplyPath bytes, local (no "..",
	// not absolute).
	Paths []string `json:"paths,omitempty"`
	Force bool     `json:"force,omitempty"` // land over paths the workspace changed underneath the stage
}

// Bounds of an ApplyRequest.
const (
	MaxApplyPaths = 1024
	MaxApplyPath  = 4096
)

// StageResult is the answer to apply and discard: `cordon apply`'s result.
type StageResult struct {
	Run         string   `json:"run"`
	Paths       []string `json:"paths"`       // landed (apply) or dropped (discard)
	Refused     []string `json:"refused"`     // "path: why", never landed
	Conflicts   []string `json:"conflicts"`   // changed underneath the stage, landed over (force)
	Quarantined []string `json:"quarantined"` // landed and renamed (a new git repository or contract)
	Pending     int      `json:"pending"`     // changes still staged
	By          string   `json:"by"`          // as the log records it: "tenant/credential"
}
