package api

import (
	"time"

	"github.com/cordonhq/cordon/session/wire"
)

var sessionRoutes = []Route{
	{Method: "POST", Path: "/v1/sessions", Role: RoleAgent, Summary: "start a session in one of the tenant's workspaces", Request: StartRequest{}, Response: Session{}, Held: true},
	{Method: "GET", Path: "/v1/sessions", Role: RoleAgent, Summary: "the tenant's sessions", Response: SessionList{}},
	{Method: "GET", Path: "/v1/sessions/{id}", Role: RoleAgent, Summary: "one session", Response: Session{}},
	{Method: "POST", Path: "/v1/sessions/{id}/exec", Role: RoleAgent, Summary: "run a command; output streams, the result comes last", Request: ExecRequest{}, Response: wire.Frame{}, Stream: true},
	{Method: "POST", Path: "/v1/sessions/{id}/sweep", Role: RoleAgent, Summary: "end a turn: delete spill files, list the paths changed", Response: Sweep{}, Held: true},
	{Method: "POST", Path: "/v1/sessions/{id}/checkpoint", Role: RoleAgent, Summary: "keep a staged session's workspace as it is now", Request: CheckpointRequest{}, Response: CheckpointResponse{}, Held: true},
	{Method: "POST", Path: "/v1/sessions/{id}/rollback", Role: RoleAgent, Summary: "make a staged session's workspace what it was at a checkpoint", Request: RollbackRequest{}, Response: RollbackResponse{}, Held: true},
	{Method: "POST", Path: "/v1/sessions/{id}/stop", Role: RoleAgent, Summary: "stop the session: commands end, credentials are revoked, the log is sealed", Response: Session{}, Held: true},
}

// StartRequest is POST /v1/sessions.
type StartRequest struct {
	// Contract is the contract's YAML; "" for the tenant's base contract. It may only
	// narrow the base contract, and names no host path outside the tenant's workspace.
	Contract string `json:"contract,omitempty"`
	// Workspace names a directory of the tenant's workspace root (letters, digits, '-',
	// '_', '.'; not starting with '.'); made empty when missing. "" asks for a new
	// workspace: with no pool, contract or stage either, the session is claimed from a
	// warm pool of the tenant's base contract when one is ready.
	Workspace string `json:"workspace,omitempty"`
	// Pool names one of the tenant's warm pools (the server's config): the session is
	// claimed from it when one is ready, and otherwise started cold on the pool's
	// contract, stage and backend. A start naming a pool names no workspace, contract
	// or stage.
	Pool    string `json:"pool,omitempty"`
	Backend string `json:"backend,omitempty"` // bwrap, docker, containerd, kubernetes or auto; "" for the server's default (a tenant placed on a cluster: kubernetes)
	Stage   bool   `json:"stage,omitempty"`   // a staged session (checkpoint, rollback)
	// Git fills the new session's workspace, which must be new or empty, from a git
	// repository at a pinned commit: the session's first commands clone it, through
	// the session's egress rules. A start whose clone fails is stopped and answered
	// with the failure.
	Git *GitSource `json:"git,omitempty"`
}

// Session is one session of the tenant.
type Session struct {
	ID        string    `json:"id"`
	State     string    `json:"state"` // "running", "stopped" or "dead"
	Started   time.Time `json:"started"`
	Backend   string    `json:"backend"`
	Workspace string    `json:"workspace"` // its name in the tenant's workspace root
	Stage     bool      `json:"stage"`
	Warm      bool      `json:"warm"`           // claimed from one of the tenant's warm pools
	Pool      string    `json:"pool,omitempty"` // the pool it was claimed from
	// Ended says why a dead session ended, once the server collected it (its
	// supervisor died: its log sealed for it, its credentials revoked).
	Ended string `json:"ended,omitempty"`
}

// SessionList is GET /v1/sessions.
type SessionList struct {
	Sessions []Session `json:"sessions"`
}

// ExecRequest is POST /v1/sessions/{id}/exec. Its fields are `cordon exec`'s.
type ExecRequest struct {
	Argv      []string `json:"argv"`
	Dir       string   `json:"dir,omitempty"`
	TimeoutMS int64    `json:"timeout_ms,omitempty"` // 0 for the contract's; never longer than it
	Cap       int      `json:"cap,omitempty"`
	Stdin     []byte   `json:"stdin,omitempty"` // base64 in JSON; bounded by the body limit
}

// Sweep is the answer to POST /v1/sessions/{id}/sweep.
type Sweep struct {
	Removed int      `json:"removed"`
	Changed []string `json:"changed"`
	// More counts the changes past the turn's bounds (10000 paths, 512 KiB), not in
	// changed: not 0, the list is incomplete.
	More int `json:"more"`
}

// CheckpointRequest is POST /v1/sessions/{id}/checkpoint.
type CheckpointRequest struct {
	Name string `json:"name,omitempty"`
}

// CheckpointResponse is its answer.
type CheckpointResponse struct {
	Checkpoint wire.Checkpoint `json:"checkpoint"`
	Problems   []string        `json:"problems"`
}

// RollbackRequest is POST /v1/sessions/{id}/rollback: To is a name, a number or -K.
type RollbackRequest struct {
	To string `json:"to"`
}

// RollbackResponse is its answer.
type RollbackResponse struct {
	Checkpoint wire.Checkpoint `json:"checkpoint"`
	Changed    []string        `json:"changed"`
	Problems   []string        `json:"problems"`
}
