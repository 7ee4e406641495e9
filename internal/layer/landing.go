package layer

import "errors"

// State is what the real workspace held at a path: recorded when the staged run
// ended, compared when its changes land.
type State struct {
	Exists bool   `json:"exists"`
	Ino    uint64 `json:"ino,omitempty"`
	Ctime  int64  `json:"ctime,omitempty"` // ns; ctime cannot be set from user space
	Dir    bool   `json:"dir,omitempty"`
	// Gone is set when the run's end found the path missing from the workspace although
	// the overlay had copied it up from there during the run, and the directory that
	// held it changed since the run started: the host removed it underneath the stage.
	// Nothing at a path matches it, so landing the path is a conflict.
	Gone bool `json:"gone,omitempty"`
}

// ctimeSlack is how far before the run's start a change still counts as made during
// it: file times come from a clock that may lag the one the start was read from.
const ctimeSlack = int64(20e6)

// Landing is how Apply lands a change set in a workspace.
type Landing struct {
	Workspace string // the real workspace
	Upper     string // the staged run's upper directory
	// Started is when the staged command started (ns, StartStamp): a workspace path
	// changed since is a conflict.
	Started int64
	// Ended is each change's workspace path as the run's end found it: a path that
	// differs now changed underneath the stage.
	Ended map[string]State
	// Writable reports whether the contract let the sandbox write the workspace path
	// rel; what it did not is never landed.
	Writable func(rel string) bool
	// UID and GID own what is landed (the workspace owner's, as if they wrote it);
	// -1 leaves it the caller's.
	UID, GID int
	// Force lands over conflicts.
	Force bool
}

// Outcome is what Apply did.
type Outcome struct {
	Applied   []string  // paths landed (or deleted)
	Refused   []Problem // paths not landed, and why
	Conflicts []string  // paths the workspace changed underneath the stage
}

// ErrConflict means the real workspace changed underneath staged paths since the
// run started; nothing was landed.
var ErrConflict = errors.New("the workspace changed underneath the staged changes")
