package gate

import (
	"sort"

	"github.com/cordonhq/cordon/gate/wire"
)

// RequestEvent is the body of gate.request: a request was filed. Field names are part
// of the audit schema (docs/audit.md).
type RequestEvent struct {
	ID         string   `json:"id"`
	Gate       string   `json:"gate"`
	Argv       []string `json:"argv"`
	Approve    string   `json:"approve"`              // the contract's policy: human or deny
	Mode       string   `json:"mode"`                 // ask or deny (--gates)
	Credential string   `json:"credential,omitempty"` // the credential's name, never its value
	// Push is what a git push was pinned to: approving pushes exactly this.
	Push *PushEvent `json:"push,omitempty"`
}

// PushEvent is a pinned git push: the URL it goes to, each ref with the object id
// pushed, and how many commits it publishes (all listed in the approver's preview).
type PushEvent struct {
	URL     string    `json:"url"`
	Refs    []PushRef `json:"refs"`
	Commits int       `json:"commits"`
}

// DecisionEvent is the body of gate.approve and gate.deny.
type DecisionEvent struct {
	ID     string `json:"id"`
	Gate   string `json:"gate"`
	By     string `json:"by"`               // the approver's user name, or "cordon"
	Reason string `json:"reason,omitempty"` // gate.deny: why
}

// ExecEvent is the body of gate.exec: an approved operation ran (or failed to start).
type ExecEvent struct {
	ID          string   `json:"id"`
	Gate        string   `json:"gate"`
	Argv        []string `json:"argv"`
	ExitCode    int      `json:"exit_code"`
	DurationMS  int64    `json:"duration_ms"`
	Credential  string   `json:"credential,omitempty"` // name only
	OutputBytes int64    `json:"output_bytes"`
	TimedOut    bool     `json:"timed_out,omitempty"`
	Reason      string   `json:"reason,omitempty"` // why it did not run, or failed to revoke
}

// Log field keys.
const (
	logKeyGate   = "gate"
	logKeyID     = "request"
	logKeyBy     = "by"
	logKeyReason = "reason"
	logKeyErr    = "err"
)

func sortPending(ps []wire.Pending) {
	sort.Slice(ps, func(i, j int) bool {
		if !ps[i].Requested.Equal(ps[j].Requested) {
			return ps[i].Requested.Before(ps[j].Requested)
		}
		return ps[i].ID < ps[j].ID
	})
}
