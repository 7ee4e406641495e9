package event

// GateRequestBody is the body of gate.request: a request was filed.
type GateRequestBody struct {
	ID         string   `json:"id"`                   // 8 hex digits, the id people approve
	Gate       string   `json:"gate"`                 // the gate's name
	Argv       []string `json:"argv"`                 // the operation, expanded
	Approve    string   `json:"approve"`              // the contract's policy: human or deny
	Mode       string   `json:"mode"`                 // ask or deny (--gates)
	Credential string   `json:"credential,omitempty"` // the credential's name, never its value
	// Push is what a git push was pinned to: approving pushes exactly this.
	Push *GatePush `json:"push,omitempty"`
}

// GatePush is a pinned git push: the URL it goes to, each ref with the object id
// pushed, and how many commits it publishes (all listed in the approver's preview).
type GatePush struct {
	URL     string        `json:"url"`
	Refs    []GatePushRef `json:"refs"`
	Commits int           `json:"commits"`
}

// GatePushRef is one refspec of a pinned push, its source pinned to an object id.
type GatePushRef struct {
	Force bool   `json:"force,omitempty"` // a forced update
	Src   string `json:"src,omitempty"`   // as named; "" deletes Dst
	OID   string `json:"oid,omitempty"`   // the object id pushed; omitted for a deletion
	Dst   string `json:"dst"`             // the full ref name pushed to
}

// GateDecisionBody is the body of gate.approve and gate.deny.
type GateDecisionBody struct {
	ID     string `json:"id"`
	Gate   string `json:"gate"`
	By     string `json:"by"`               // the approver's user name, or "cordon"
	Reason string `json:"reason,omitempty"` // gate.deny: why
}

// GateExecBody is the body of gate.exec: an approved operation ran (or failed to start).
type GateExecBody struct {
	ID          string   `json:"id"`
	Gate        string   `json:"gate"`
	Argv        []string `json:"argv"`
	ExitCode    int      `json:"exit_code"` // 124 timeout, 125 did not run, 127 not found
	DurationMS  int64    `json:"duration_ms"`
	Credential  string   `json:"credential,omitempty"` // name only
	OutputBytes int64    `json:"output_bytes"`
	TimedOut    bool     `json:"timed_out,omitempty"`
	Reason      string   `json:"reason,omitempty"` // why it did not run, or failed to revoke
}
