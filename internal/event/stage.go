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

// CheckpointBody is the body of session.checkpoint: a staged session's workspace
// kept as it is now, to roll back to (cordon session checkpoint; one is taken
// before each command). Cmd is empty: it is taken between commands.
type CheckpointBody struct {
	N    int    `json:"n"`              // its number in the session, from 1
	Name string `json:"name,omitempty"` // the name it was given; "" for an automatic one
	Auto bool   `json:"auto,omitempty"` // taken before a command
	// Copied are the staged files copied; Linked those unchanged since the previous
	// checkpoint, which share its copy.
	Copied int `json:"copied"`
	Linked int `json:"linked"`
	// Problems are staged entries the checkpoint does not hold ("path: why"): a
	// rollback to it does not restore them.
	Problems []string `json:"problems,omitempty"`
	// Dropped is the number of the automatic checkpoint this one pushed out.
	Dropped int `json:"dropped,omitempty"`
}

// RollbackBody is the body of session.rollback: a staged session's workspace made
// what it was at checkpoint N. Processes still running keep running.
type RollbackBody struct {
	N    int    `json:"n"`              // the checkpoint rolled back to
	Name string `json:"name,omitempty"` // its name, if it had one
	// Paths are the workspace paths the rollback changed; the fs.diff that follows
	// holds the content.
	Paths []string `json:"paths"`
	// PathsOmitted counts the paths changed past the first 1000 (or 256 KiB of them).
	PathsOmitted int `json:"paths_omitted,omitempty"`
	// Problems are what the checkpoint holds that was not restored ("path: why").
	Problems []string `json:"problems,omitempty"`
	// Running are the commands running meanwhile (their cmd ids).
	Running []string `json:"running,omitempty"`
	By      string   `json:"by"` // who asked
	// Error is why the rollback stopped before it was done: the paths it changed
	// are changed, the rest are not ("" when it was done).
	Error string `json:"error,omitempty"`
}
