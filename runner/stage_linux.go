package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/audit/fsdiff"
	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/internal/layer"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/internal/termtext"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// prepareStage makes the run's stage directory in its audit directory and tells the
// backend to write there, refusing a backend that cannot.
func (r *run) prepareStage(host *sandbox.Host) error {
	if err := r.o.Backend.CanStage(); errors.Is(err, sandbox.ErrNoStage) {
		return errdefs.Unavailablef("%s: %w; run without --stage, or on bwrap", r.o.Backend.Name(), sandbox.ErrNoStage)
	} else if err != nil {
		return err
	}
	dir := filepath.Join(r.log.Dir(), stageDirName)
	for _, d := range []string{dir, filepath.Join(dir, stageUpperName), filepath.Join(dir, stageWorkName)} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return errdefs.Unavailablef("creating the stage: %w", err)
		}
	}
	r.stage = &stageRecord{Run: r.res.RunID, Workspace: r.plan.Workspace, Mounts: mountsBelow(r.plan),
		MaxEntries: int(r.plan.Limits.Diff.Entries)}
	if r.session {
		// A staged session's conflicts are judged from its start (a run's from its
		// command's).
		r.stage.Started = layer.StartStamp(dir, r.o.now())
	}
	r.stageDir = dir
	r.undo.add("removing an unfinished stage", func(context.Context) error {
		if r.stage.Finished {
			return nil // it waits for apply or discard
		}
		return linux.RemoveTree(dir)
	})
	if err := r.stage.save(dir); err != nil {
		return errdefs.Unavailablef("%w", err)
	}
	host.Stage = &sandbox.Stage{Upper: filepath.Join(dir, stageUpperName), Work: filepath.Join(dir, stageWorkName)}
	r.rd.owner.Stage = dir
	return r.rd.save()
}

// stagedDiff is a staged command's diff, taken from its change set alone: the upper
// directory names every path that can differ, so no walk of the workspace is needed.
// The before side of each is the workspace (the overlay's lower layer) at that path;
// the after side the workspace as the command left it, an overlay view of the upper
// directory on the workspace, made for the purpose and mounted nowhere. The host may
// have changed the workspace since the command started: the before side is read now
// (apply's conflict check judges such changes).
func (r *run) stagedDiff(ctx context.Context) (*fsdiff.Result, error) {
	upperDir := filepath.Join(r.stageDir, stageUpperName)
	set, err := layer.Read(upperDir, r.plan.Workspace, int(r.plan.Limits.Diff.Entries))
	if err != nil {
		return nil, err
	}
	upper, err := linux.OpenDirNoLinks(upperDir)
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
	opts := diffOptions(r.plan)
	return fsdiff.DiffChanged(ctx, linux.FDPath(ws), linux.FDPath(view), changedPaths(set), opts)
}

// changedPaths are the paths a change set can differ at. Only a directory merged
// with the workspace's keeps the workspace's entries below it; an entry the change set
// could not describe is compared in full.
func changedPaths(set *layer.Set) []fsdiff.ChangedPath {
	out := make([]fsdiff.ChangedPath, 0, len(set.Changes)+len(set.Problems))
	for _, c := range set.Changes {
		out = append(out, fsdiff.ChangedPath{Path: c.Path, Deep: c.Kind != layer.Dir || c.Opaque})
	}
	for _, p := range set.Problems {
		out = append(out, fsdiff.ChangedPath{Path: p.Path, Deep: true})
	}
	slices.SortFunc(out, func(a, b fsdiff.ChangedPath) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// finishStage records, once the command has ended and nothing writes the upper
// directory, each changed path's workspace entry, and says what is staged.
func (r *run) finishStage() error {
	set, err := layer.Read(filepath.Join(r.stageDir, stageUpperName), r.plan.Workspace, int(r.plan.Limits.Diff.Entries))
	if err != nil {
		return errdefs.Unavailablef("%w", err)
	}
	ws, err := linux.OpenTree(r.plan.Workspace)
	if err != nil {
		return err
	}
	defer ws.Close()
	r.stage.Ended = make(map[string]layer.State, len(set.Changes))
	for _, c := range set.Changes {
		r.stage.Ended[c.Path] = layer.EndState(ws, c, r.stage.Started)
	}
	r.stage.Finished = true
	r.res.Staged = pending(set, r.stage)
	if r.res.Staged == 0 && len(set.Problems) == 0 {
		// Nothing to land: no stage waits for apply or discard.
		return linux.RemoveTree(r.stageDir)
	}
	if err := r.disownStage(); err != nil {
		return err
	}
	if err := r.stage.save(r.stageDir); err != nil {
		return err
	}
	r.stage.kept = true
	for _, p := range set.Problems {
		fmt.Fprintf(r.o.Stderr, "cordon: staged %s: %s\n", termtext.Line(p.Path), p.Why)
	}
	return nil
}

// disownStage gives what the sandbox wrote in the kept change set, owned on disk by
// the host uid leased to this run, to the workspace owner (who owns what apply lands
// anyway): once the run ends the uid is leased again, and nothing on the host may stay
// its. Nothing writes the upper directory any more; no link is followed.
func (r *run) disownStage() error {
	if r.uid.leased == 0 {
		return nil
	}
	uid, gid, err := linux.Owner(r.plan.Workspace)
	if err != nil {
		return err
	}
	upper := filepath.Join(r.stageDir, stageUpperName)
	return filepath.WalkDir(upper, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if fi, err := d.Info(); err != nil || !ownedBy(fi, r.uid.leased) {
			return err
		}
		if err := os.Lchown(p, uid, gid); err != nil {
			return fmt.Errorf("giving the staged %s to the workspace owner: %w", p, err)
		}
		return nil
	})
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

// ApplyOptions configure Apply.
type ApplyOptions struct {
	AuditRoot string   // where the run's log is
	Paths     []string // workspace-relative paths to land; none means all
	Force     bool     // land over conflicts
	Stderr    io.Writer
	// By is who applies, as the log records it: "" for this host's user (cordon
	// serve names the tenant and credential, "tenant/credential").
	By string
	// Within, when set, is the directory the run's workspace must be at or below:
	// a stage naming another is refused, nothing landed (cordon serve: the tenant's
	// workspace root).
	Within string
}

// DiscardOptions configure Discard.
type DiscardOptions struct {
	By string // who discards, as the log records it: "" for this host's user
}

// isWithin reports whether the absolute path is dir or below it. dir's symbolic links
// are resolved first, as a plan's workspace has its own resolved.
func isWithin(path, dir string) bool {
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		dir = r
	}
	rel, err := filepath.Rel(filepath.Clean(dir), filepath.Clean(path))
	return filepath.IsAbs(path) && err == nil && filepath.IsLocal(rel)
}

func byOrUser(by string) string {
	if by != "" {
		return by
	}
	return userName()
}

// StageResult is what Apply or Discard did.
type StageResult struct {
	Paths       []string // landed (apply) or dropped (discard)
	Refused     []string // "path: why", never landed
	Conflicts   []string // changed underneath the stage
	Quarantined []string
	Pending     int // changes still staged
}

// Apply lands the staged changes of run id (those at or below o.Paths, or all) in
// its workspace and records a stage.apply line in its log. It refuses, landing
// nothing, when the workspace changed underneath a staged path since the run
// started (unless o.Force), and never lands what the contract did not let the
// sandbox write. What it lands is disarmed as a direct run's changes are: a new git
// repository or contract is renamed (quarantine). Once nothing is left staged, the
// stage directory goes.
func Apply(id string, o ApplyOptions) (StageResult, error) {
	var res StageResult
	dir, rec, unlock, err := openStage(o.AuditRoot, id)
	if err != nil {
		return res, err
	}
	defer unlock()
	if o.Within != "" && !isWithin(rec.Workspace, o.Within) {
		return res, errdefs.Invalidf("run %s's workspace is not in the workspace root it may land in", id)
	}
	// Nothing lands while a run or session works in the workspace tree: a direct
	// one's masks are mounted on placeholders a landing could remove or replace.
	wl, err := lockWorkspace(string(paths.RunRoot()), rec.Workspace)
	if err != nil {
		return res, err
	}
	defer wl.release()
	upper := filepath.Join(dir, stageUpperName)
	set, err := layer.Read(upper, rec.Workspace, rec.maxEntries())
	if err != nil {
		return res, errdefs.Unavailablef("%w", err)
	}
	changes, unmatched := set.Select(o.Paths)
	if len(unmatched) > 0 {
		return res, errdefs.Invalidf("nothing staged at %q", unmatched)
	}
	changes = notYet(changes, rec)
	l := layer.Landing{Workspace: rec.Workspace, Upper: upper, Started: rec.Started, Ended: rec.Ended,
		Writable: rec.writable, UID: -1, GID: -1, Force: o.Force}
	if os.Geteuid() == 0 {
		if l.UID, l.GID, err = linux.Owner(rec.Workspace); err != nil {
			return res, errdefs.Unavailablef("%w", err)
		}
	}
	var out layer.Outcome
	err = linux.WithoutReserve(func() (err error) { // the sandbox's files, not cordon's
		out, err = layer.Apply(l, changes)
		return err
	})
	res.Conflicts = out.Conflicts
	for _, p := range out.Refused {
		res.Refused = append(res.Refused, p.Path+": "+p.Why)
		rec.Refused = append(rec.Refused, p.Path)
	}
	for _, p := range set.Problems {
		res.Refused = append(res.Refused, p.Path+": "+p.Why)
	}
	if errors.Is(err, layer.ErrConflict) {
		return res, errdefs.Deniedf("%w", err)
	}
	res.Paths = out.Applied
	rec.Applied = append(rec.Applied, out.Applied...)
	res.Quarantined = quarantineLanded(rec.Workspace, out.Applied, o.Stderr)
	res.Pending = pending(set, rec)
	if serr := rec.save(dir); err == nil {
		err = serr
	}
	body := event.StageBody{Paths: res.Paths, Refused: res.Refused, Conflicts: res.Conflicts, Forced: o.Force,
		Quarantined: res.Quarantined, Pending: res.Pending, By: byOrUser(o.By)}
	if aerr := audit.Append(filepath.Join(o.AuditRoot, id), event.StageApply, body); err == nil {
		err = aerr
	}
	if err != nil {
		return res, errdefs.Unavailablef("applying: %w", err)
	}
	if res.Pending == 0 {
		if err := linux.RemoveTree(dir); err != nil {
			return res, errdefs.Unavailablef("removing the applied stage: %w", err)
		}
	}
	return res, nil
}

// notYet drops the changes an earlier apply landed or refused.
func notYet(changes []layer.Change, rec *stageRecord) []layer.Change {
	done := map[string]bool{}
	for _, p := range append(append([]string(nil), rec.Applied...), rec.Refused...) {
		done[p] = true
	}
	var out []layer.Change
	for _, c := range changes {
		if !done[c.Path] {
			out = append(out, c)
		}
	}
	return out
}

// quarantineLanded disarms what apply landed the way a direct run's diff is disarmed
// (quarantine): the same rules, on the paths landed.
func quarantineLanded(ws string, landed []string, stderr io.Writer) []string {
	if len(landed) == 0 {
		return nil
	}
	diff := &fsdiff.Result{}
	for _, p := range landed {
		diff.Changes = append(diff.Changes, fsdiff.Change{Path: p, Op: fsdiff.Added})
	}
	r := &run{plan: &contract.Plan{Workspace: ws}, o: &Options{Stderr: orDiscard(stderr), Log: slog.New(slog.DiscardHandler)}}
	return r.quarantine(diff)
}

// Discard drops the staged changes of run id and records a stage.discard line in its
// log. The workspace is not touched.
func Discard(auditRoot, id string, o DiscardOptions) (StageResult, error) {
	var res StageResult
	dir, rec, unlock, err := openStage(auditRoot, id)
	if err != nil {
		return res, err
	}
	defer unlock()
	logDir := filepath.Join(auditRoot, id)
	if set, err := layer.Read(filepath.Join(dir, stageUpperName), rec.Workspace, rec.maxEntries()); err == nil {
		for _, c := range notYet(set.Changes, rec) {
			if c.Kind != layer.Dir || c.Opaque || !rec.Ended[c.Path].Dir {
				res.Paths = append(res.Paths, c.Path)
			}
		}
	}
	if err := audit.Append(logDir, event.StageDiscard, event.StageBody{Paths: res.Paths, By: byOrUser(o.By)}); err != nil {
		return res, errdefs.Unavailablef("%w", err)
	}
	if err := linux.RemoveTree(dir); err != nil {
		return res, errdefs.Unavailablef("removing the stage: %w", err)
	}
	return res, nil
}

// openStage locks the stage of run id and reads its record under the lock (an apply or
// discard that held it until now may have changed the record, or removed the stage),
// once the run's log verifies and agrees with the record: nothing is done with a stage
// whose log does not say what happened to it.
func openStage(auditRoot, id string) (dir string, rec *stageRecord, unlock func(), err error) {
	if err := audit.ValidateRunID(id); err != nil {
		return "", nil, nil, errdefs.Invalidf("%w", err)
	}
	if dir, _, err = stageDirOf(auditRoot, id); err != nil {
		return "", nil, nil, err
	}
	if unlock, err = lockStage(dir); err != nil {
		return "", nil, nil, err
	}
	events := filepath.Join(auditRoot, id, audit.EventsFile)
	if dir, rec, err = stageDirOf(auditRoot, id); err == nil {
		if _, verr := audit.Verify(events); verr != nil {
			err = errdefs.Unavailablef("the run's log does not verify, so nothing of its stage is done: %w", verr)
		} else if merr := matchLog(events, rec); merr != nil {
			err = errdefs.Unavailablef("nothing of its stage is done: %w", merr)
		}
	}
	if err != nil {
		unlock()
		return "", nil, nil, err
	}
	return dir, rec, unlock, nil
}

// matchLog checks that the log's stage.apply lines name exactly the paths the stage
// record says were landed, and that none said nothing was left: lines after the seal
// are optional to Verify, so a log cut back to an earlier one verifies; the record
// tells. What the next line records then rests on a log that says what happened.
func matchLog(logPath string, rec *stageRecord) error {
	recs, err := audit.ReadEvents(logPath)
	if err != nil {
		return err
	}
	logged := map[string]bool{}
	for _, r := range recs {
		if !audit.AfterSeal(r.Type) {
			continue
		}
		var b event.StageBody
		if err := r.DecodeBody(&b); err != nil {
			return err
		}
		if r.Type == event.StageDiscard || b.Pending == 0 {
			return errors.New("the log says nothing of the run is staged any more, yet its stage is there")
		}
		for _, p := range b.Paths {
			logged[p] = true
		}
	}
	recorded := map[string]bool{}
	for _, p := range rec.Applied {
		recorded[p] = true
	}
	if !maps.Equal(logged, recorded) {
		return fmt.Errorf("the log names %d path(s) applied, the stage record %d: lines after the run's seal were cut off, or the record was edited", len(logged), len(recorded))
	}
	return nil
}
