package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/audit/fsdiff"
	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/layer"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/termtext"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// A staged run (Options.Stage) writes to an overlay of the workspace: the real
// workspace is its read-only lower layer and the sandbox's writes go to an upper
// directory kept with the run's log (STAGE below, <audit dir>/stage), out of the
// sandbox's reach and beyond the run: the change set a person then lands (Apply) or
// drops (Discard), each a line of the run's log after its seal.

// Names in a run's stage directory.
const (
	stageDirName    = audit.StageDirName
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
}

// prepareStage makes the run's stage directory in its audit directory and tells the
// backend to write there, refusing a backend that cannot.
func (r *run) prepareStage(host *sandbox.Host) error {
	if r.session {
		return errdefs.Invalidf("--stage: staged sessions are not implemented yet; stage one-command runs (cordon run --stage)")
	}
	st, ok := r.o.Backend.(sandbox.Stager)
	if !ok {
		return errdefs.Unavailablef("%s: %w; run without --stage, or on bwrap", r.o.Backend.Name(), sandbox.ErrNoStage)
	}
	if err := st.CanStage(); err != nil {
		return err
	}
	dir := filepath.Join(r.log.Dir(), stageDirName)
	for _, d := range []string{dir, filepath.Join(dir, stageUpperName), filepath.Join(dir, stageWorkName)} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return errdefs.Unavailablef("creating the stage: %w", err)
		}
	}
	r.stage = &stageRecord{Run: r.res.RunID, Workspace: r.plan.Workspace, Mounts: mountsBelow(r.plan)}
	r.stageDir = dir
	r.undo.add("removing an unfinished stage", func(context.Context) error {
		if r.stage.Finished {
			return nil // it waits for apply or discard
		}
		return os.RemoveAll(dir)
	})
	if err := r.stage.save(dir); err != nil {
		return errdefs.Unavailablef("%w", err)
	}
	host.Stage = &sandbox.Stage{Upper: filepath.Join(dir, stageUpperName), Work: filepath.Join(dir, stageWorkName)}
	r.rd.owner.Stage = dir
	return r.rd.save()
}

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
	tmp := filepath.Join(dir, stageRecordName+".tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("saving the stage record: %w", err)
	}
	return os.Rename(tmp, filepath.Join(dir, stageRecordName))
}

func loadStage(dir string) (*stageRecord, error) {
	data, err := os.ReadFile(filepath.Join(dir, stageRecordName))
	if err != nil {
		return nil, err
	}
	var s stageRecord
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, stageRecordName), err)
	}
	return &s, nil
}

// stagedDiff is a staged command's diff: the workspace as the command left it is an
// overlay view of the upper directory on the workspace, made for the purpose and
// mounted nowhere.
func (r *run) stagedDiff(ctx context.Context, tracker *fsdiff.Tracker) (*fsdiff.Result, error) {
	upper, err := linux.OpenDirNoLinks(filepath.Join(r.stageDir, stageUpperName))
	if err != nil {
		return nil, err
	}
	defer upper.Close()
	ws, err := linux.OpenDirNoLinks(r.plan.Workspace)
	if err != nil {
		return nil, err
	}
	defer ws.Close()
	view, err := linux.NewOverlayView(upper, ws)
	if err != nil {
		return nil, err
	}
	defer view.Close()
	return tracker.DiffAt(ctx, linux.FDPath(view))
}

// finishStage records, once the command has ended and nothing writes the upper
// directory, each changed path's workspace entry, and says what is staged.
func (r *run) finishStage() error {
	set, err := layer.Read(filepath.Join(r.stageDir, stageUpperName))
	if err != nil {
		return err
	}
	ws, err := linux.OpenTree(r.plan.Workspace)
	if err != nil {
		return err
	}
	defer ws.Close()
	r.stage.Ended = make(map[string]layer.State, len(set.Changes))
	for _, c := range set.Changes {
		r.stage.Ended[c.Path] = layer.StateOf(ws, c.Path)
	}
	r.stage.Finished = true
	if err := r.stage.save(r.stageDir); err != nil {
		return err
	}
	r.res.Staged = pending(set, r.stage)
	for _, p := range set.Problems {
		fmt.Fprintf(r.o.Stderr, "cordon: staged %s: %s\n", termtext.Line(p.Path), p.Why)
	}
	return nil
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

// stageDirOf is the stage directory of run id in the audit root, and its record.
func stageDirOf(auditRoot, id string) (string, *stageRecord, error) {
	dir := filepath.Join(auditRoot, id, stageDirName)
	s, err := loadStage(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if _, serr := os.Stat(filepath.Join(auditRoot, id)); serr != nil {
			return "", nil, errdefs.Invalidf("no run %s in %s", id, auditRoot)
		}
		return "", nil, errdefs.Invalidf("run %s has nothing staged: it was not a staged run, or its changes were applied or discarded (cordon audit show %s)", id, id)
	case err != nil:
		return "", nil, errdefs.Unavailablef("%w", err)
	case !s.Finished:
		return "", nil, errdefs.Invalidf("run %s has not finished: its changes can be applied once it has", id)
	}
	return dir, s, nil
}

// lockStage takes the stage's lock, or says another apply or discard holds it.
func lockStage(dir string) (func(), error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, errdefs.Unavailablef("%w", err)
	}
	ok, err := linux.TryLock(f)
	if err != nil || !ok {
		f.Close()
		if err == nil {
			err = errors.New("another cordon apply or discard is working on it")
		}
		return nil, errdefs.Unavailablef("locking the stage: %w", err)
	}
	return func() { f.Close() }, nil
}
