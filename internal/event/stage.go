package event

// StageBody is the body of stage.apply and stage.discard: what a person did with a
// staged run's changes after it ended.
type StageBody struct {
	Paths []string `json:"paths"` // workspace paths landed (apply) or dropped (discard)
	// Refused are paths apply did not land: the contract did not let the sandbox
	// write them, or the staged entry cannot be represented ("path: why").
	Refused []string `json:"refused,omitempty"`
	// Conflicts are paths the workspace changed underneath the stage, landed over
	// because Forced.
	Conflicts []string `json:"conflicts,omitempty"`
	Forced    bool     `json:"forced,omitempty"`
	// Quarantined are landed paths renamed so that no tool on the host obeys them
	// (a nested git repository, a contract), as a direct run renames them.
	Quarantined []string `json:"quarantined,omitempty"`
	Pending     int      `json:"pending"` // changes still staged after this
	By          string   `json:"by"`      // who ran apply or discard
}
