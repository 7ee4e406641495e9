package runner

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/atomicfile"
	"github.com/cordonhq/cordon/internal/layer"
	"github.com/cordonhq/cordon/internal/paths"
)

// A staged run (Options.Stage) writes to an overlay of the workspace: the real
// workspace is its read-only lower layer and the sandbox's writes go to an upper
// directory kept with the run's log (STAGE below, <audit dir>/stage), out of the
// sandbox's reach and beyond the run: the change set a person then lands (Apply) or
// drops (Discard), each a line of the run's log after its seal.

// Names in a run's stage directory.
const (
	stageDirName    = audit.StageDir
	stageRecordName = "stage.json"
	stageUpperName  = "upper"
	stageWorkName   = "work"
)

// stageRecord is STAGE/stage.json: what Apply needs to land the change set as the
// contract allowed, and to find what changed underneath it.
type stageRecord struct {
	Run       string `json:"run"`
	Workspace string `json:"workspace"`
	// Started is when the command started (Unix ns): a workspace path changed since
	// is a conflict.
	Started int64 `json:"started"`
	// Mounts are the plan's mounts at or below the workspace: a path lands only if
	// the sandbox could write it there.
	Mounts []stageMount `json:"mounts"`
	// Ended is each changed path's workspace entry as the run's end found it.
	Ended map[string]layer.State `json:"ended"`
	// Applied are the paths landed so far (apply of a subset); Refused those that
	// never will.
	Applied []string `json:"applied,omitempty"`
	Refused []string `json:"refused,omitempty"`
	// Finished is set once the run ended and nothing writes the upper directory any
	// more; gc removes a stage whose run died before.
	Finished bool `json:"finished"`
	// MaxEntries is the run's limits.diff.entries: what apply and discard read of the
	// upper directory at most (layer.Read), as the run did.
	MaxEntries int `json:"max_entries,omitempty"`

	kept bool // finished with something to apply or discard: the stage stays
}

// maxEntries is how many entries of the upper directory may be read: the run's bound,
// or the default one for a record made before the bound was kept.
func (s *stageRecord) maxEntries() int {
	if s.MaxEntries > 0 {
		return s.MaxEntries
	}
	return int(contract.DefaultDiffLimits.Entries)
}

// waits reports whether s is a finished stage left for apply or discard (run.end's
// staged): one that held nothing was removed.
func (s *stageRecord) waits() bool { return s != nil && s.kept }

// stageMount is one of the plan's mounts at or below the workspace, in plan order,
// and whether the sandbox could write there (a read-write bind).
type stageMount struct {
	Path     string `json:"path"`
	Writable bool   `json:"writable"`
}

// mountsBelow returns plan's mounts at or below its workspace.
func mountsBelow(plan *contract.Plan) []stageMount {
	var out []stageMount
	for _, m := range plan.Mounts {
		if m.Path == plan.Workspace || strings.HasPrefix(m.Path, plan.Workspace+"/") {
			out = append(out, stageMount{m.Path, m.Type == contract.Bind && m.Access == contract.ReadWrite})
		}
	}
	return out
}

// writable reports whether the workspace path rel was the sandbox's to write: the
// innermost mount holding it (mounts are ordered parent first) is a read-write bind.
func (s *stageRecord) writable(rel string) bool {
	p := filepath.Join(s.Workspace, filepath.FromSlash(rel))
	ok := false
	for _, m := range s.Mounts {
		// Lexically: the path is named as the sandbox named it, and apply follows no
		// link on the host.
		if p == m.Path || strings.HasPrefix(p, m.Path+"/") {
			ok = m.Writable
		}
	}
	return ok
}

func (s *stageRecord) save(dir string) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, stageRecordName), data, 0o600); err != nil {
		return fmt.Errorf("saving the stage record: %w", err)
	}
	return nil
}

// maxStageRecord bounds what is read of a stage record: it lists every changed path
// (up to limits.diff.entries), and those run far below this.
const maxStageRecord = 256 << 20

// loadStage reads dir's stage record as cordon's own ([paths.ReadRecordMax]): a regular
// file, no link, owned by this user and writable by no one else, for what it says
// decides what apply lands where.
func loadStage(dir string) (*stageRecord, error) {
	data, err := paths.ReadRecordMax(filepath.Join(dir, stageRecordName), paths.Owner(), maxStageRecord)
	if err != nil {
		return nil, err
	}
	var s stageRecord
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, stageRecordName), err)
	}
	return &s, nil
}

// pending counts the changes of set that apply would still land: not landed yet, not
// refused, and not a directory that only holds other changes.
func pending(set *layer.Set, s *stageRecord) int {
	done := map[string]bool{}
	for _, p := range append(append([]string(nil), s.Applied...), s.Refused...) {
		done[p] = true
	}
	n := 0
	for _, c := range set.Changes {
		if done[c.Path] || c.Kind == layer.Dir && !c.Opaque && s.Ended[c.Path].Dir {
			continue
		}
		n++
	}
	return n
}
