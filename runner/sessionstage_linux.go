package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/internal/layer"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// checkpointsName is STAGE/checkpoints: one directory per checkpoint, by number.
const checkpointsName = "checkpoints"

// checkpoint is a checkpoint and its copy.
type checkpoint struct {
	Checkpoint
	copy *layer.Checkpoint
}

// openStagedSession opens the overlay a staged session's sandbox writes, once its
// process 1 runs, and makes the directory of its checkpoints.
func (r *run) openStagedSession() error {
	live, err := r.sb.StagedWorkspace()
	if errors.Is(err, sandbox.ErrNoStage) {
		return errdefs.Unavailablef("%s: staged sessions: %w", r.o.Backend.Name(), sandbox.ErrNoStage)
	}
	if err != nil {
		return errdefs.Unavailablef("opening the staged workspace: %w", err)
	}
	r.ss = &stagedSession{live: live}
	r.undo.add("closing the staged workspace", func(context.Context) error { return live.Close() })
	if err := os.Mkdir(filepath.Join(r.stageDir, checkpointsName), 0o700); err != nil {
		return errdefs.Unavailablef("creating the checkpoints: %w", err)
	}
	return nil
}

// checkpoint copies the staged workspace's upper directory, as it is now, into a new
// checkpoint and logs it. An automatic one (auto) pushes out the oldest beyond
// AutoCheckpoints.
func (r *run) checkpoint(name string, auto bool) (Checkpoint, error) {
	ss := r.ss
	if ss == nil {
		return Checkpoint{}, errdefs.Invalidf("checkpoints are kept by staged sessions only (cordon session start --stage)")
	}
	if err := validCheckpointName(name); err != nil {
		return Checkpoint{}, err
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.ended {
		return Checkpoint{}, errdefs.Unavailablef("%w", ErrClosed)
	}
	for _, c := range ss.named {
		if name != "" && c.Name == name {
			return Checkpoint{}, errdefs.Invalidf("the session has a checkpoint %q already (number %d)", name, c.N)
		}
	}
	if !auto && len(ss.named) >= MaxNamedCheckpoints {
		// Each is a copy on the host's disk and an index in cordon's memory, and an
		// agent may ask for them (the MCP checkpoint tool).
		return Checkpoint{}, errdefs.Invalidf("the session keeps %d checkpoints asked for already, the most it keeps: roll back to one, or stop the session", MaxNamedCheckpoints)
	}
	n := ss.n + 1
	var prev *layer.Checkpoint
	if ss.last != nil {
		prev = ss.last.copy
	}
	dir := filepath.Join(r.stageDir, checkpointsName, strconv.Itoa(n))
	// The copy is the sandbox's data: the disk's reserve is not its to fill. Its
	// directory (one block) is cordon's, so that a checkpoint of nothing changed still
	// is one on a full disk.
	if err := os.Mkdir(dir, 0o700); err != nil {
		return Checkpoint{}, errdefs.Unavailablef("checkpoint: %w", err)
	}
	var c *layer.Checkpoint
	err := linux.WithoutReserve(func() (err error) {
		c, err = layer.TakeCheckpoint(filepath.Join(r.stageDir, stageUpperName), r.plan.Workspace, dir, prev, r.maxStaged())
		return err
	})
	if err != nil {
		_ = linux.RemoveTree(dir)
		return Checkpoint{}, errdefs.Unavailablef("%w%s", err, tooManyHint(err))
	}
	ss.n = n
	cp := &checkpoint{Checkpoint{N: n, Name: name, Auto: auto, Copied: c.Copied, Linked: c.Linked, Problems: problemLines(c.Problems)}, c}
	ss.last = cp
	body := event.CheckpointBody{N: n, Name: name, Auto: auto, Copied: c.Copied, Linked: c.Linked, Problems: cp.Problems}
	if auto {
		ss.auto = append(ss.auto, cp)
		if len(ss.auto) > AutoCheckpoints {
			old := ss.auto[0]
			ss.auto = ss.auto[1:]
			body.Dropped = old.N
			if err := linux.RemoveTree(old.copy.Dir); err != nil {
				r.o.Log.Warn("removing an old checkpoint", "err", err)
			}
		}
	} else {
		ss.named = append(ss.named, cp)
	}
	r.log.Emit(event.Event{Type: event.SessionCheckpoint, Body: body})
	return cp.Checkpoint, nil
}

// Bounds of the paths a rollback lists, in its log line and its answer: every path
// it changed is in the fs.diff that follows (bounded as any diff), and the sandbox
// chooses how many there are and how long.
const (
	maxRollbackPaths      = 1000
	maxRollbackPathsBytes = 256 << 10
)

// capPaths is the first of paths within the rollback bounds, and how many it leaves.
func capPaths(paths []string) (listed []string, omitted int) {
	n := 0
	for i, p := range paths {
		if n += len(p); i == maxRollbackPaths || n > maxRollbackPathsBytes {
			return paths[:i], len(paths) - i
		}
	}
	return paths, 0
}

// maxProblemLines is how many of a checkpoint's or a rollback's problems its log
// line names; the rest are counted.
const maxProblemLines = 100

func problemLines(ps []layer.Problem) []string {
	var out []string
	for i, p := range ps {
		if i == maxProblemLines {
			out = append(out, fmt.Sprintf("and %d more", len(ps)-i))
			break
		}
		out = append(out, p.Path+": "+p.Why)
	}
	return out
}

// maxStaged is how many entries of the staged workspace's upper directory, or of a
// checkpoint's copy, cordon reads at most: the plan's limits.diff.entries, which
// bounds the staged change set too (layer.Read). The sandbox fills the upper
// directory; what a checkpoint or a rollback holds of it is cordon's memory.
func (r *run) maxStaged() int { return int(r.plan.Limits.Diff.Entries) }

// tooManyHint is what to do about err when the staged workspace is past maxStaged.
func tooManyHint(err error) string {
	if !errors.Is(err, layer.ErrTooMany) && !errors.Is(err, layer.ErrTooLong) {
		return ""
	}
	return "; the staged workspace cannot be checkpointed, rolled back or applied: stop the session (cordon session stop ID: a change set past the bound is not kept), or start one whose contract raises limits.diff.entries"
}

// find is the checkpoint to: "-K" the K-th latest automatic one, a number, or a name.
func (ss *stagedSession) find(to string) (*checkpoint, error) {
	kept := fmt.Sprintf("the session keeps its last %d automatic checkpoints (one before each command) and the ones asked for", AutoCheckpoints)
	if k, err := strconv.Atoi(strings.TrimPrefix(to, "-")); err == nil && strings.HasPrefix(to, "-") {
		if k < 1 || k > len(ss.auto) {
			return nil, errdefs.Invalidf("no automatic checkpoint %s: %d are kept now; %s", to, len(ss.auto), kept)
		}
		return ss.auto[len(ss.auto)-k], nil
	}
	all := append(append([]*checkpoint(nil), ss.auto...), ss.named...)
	if n, err := strconv.Atoi(to); err == nil {
		for _, c := range all {
			if c.N == n {
				return c, nil
			}
		}
		return nil, errdefs.Invalidf("no checkpoint %d: it was never taken, or is gone; %s", n, kept)
	}
	for _, c := range ss.named {
		if c.Name == to {
			return c, nil
		}
	}
	return nil, errdefs.Invalidf("no checkpoint named %q in the session", to)
}

// rollback makes the staged workspace what it was at checkpoint to, through the live
// overlay, and logs it: what changed before it (between commands) first, then the
// session.rollback line, then the rollback's own diff, so that the next command's
// baseline is the rolled-back workspace.
func (r *run) rollback(ctx context.Context, to string) (RollbackResult, error) {
	ss := r.ss
	if ss == nil {
		return RollbackResult{}, errdefs.Invalidf("rollback is for staged sessions only (cordon session start --stage)")
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.ended {
		return RollbackResult{}, errdefs.Unavailablef("%w", ErrClosed)
	}
	cp, err := ss.find(to)
	if err != nil {
		return RollbackResult{}, err
	}
	r.closeBetween(ctx)
	res := RollbackResult{To: cp.Checkpoint}
	changed, problems, err := r.restore(cp)
	listed, omitted := capPaths(changed)
	// What the checkpoint did not keep is not restored either: said again here.
	res.Changed, res.Problems = listed, append(append([]string(nil), cp.Problems...), problemLines(problems)...)
	if omitted > 0 {
		res.Problems = append(res.Problems, fmt.Sprintf("%s%d more path(s) changed, not listed (the log's session.rollback line counts them)", MorePathsPrefix, omitted))
	}
	body := event.RollbackBody{N: cp.N, Name: cp.Name, Paths: nonNil(listed), PathsOmitted: omitted,
		Problems: res.Problems, Running: r.sink.Running(), By: userName()}
	if err != nil {
		body.Error = err.Error()
	}
	r.log.Emit(event.Event{Type: event.SessionRollback, Body: body})
	r.closeBetween(ctx)
	if err != nil && len(changed) > 0 {
		return res, errdefs.Unavailablef("rolling back to checkpoint %d stopped with %d path(s) restored and the rest not (the workspace is at neither the checkpoint nor where it was: roll back again): %w%s", cp.N, len(changed), err, tooManyHint(err))
	}
	if err != nil {
		return res, errdefs.Unavailablef("rolling back to checkpoint %d (nothing restored): %w%s", cp.N, err, tooManyHint(err))
	}
	return res, nil
}

// restore writes, through the live overlay, what the view of cp over the workspace
// holds wherever the two can differ: the paths of the upper directory and of cp.
func (r *run) restore(cp *checkpoint) (changed []string, problems []layer.Problem, err error) {
	now, err := layer.UpperPaths(filepath.Join(r.stageDir, stageUpperName), r.plan.Workspace, r.maxStaged())
	if err != nil {
		return nil, nil, err
	}
	then, err := layer.UpperPaths(cp.copy.Dir, r.plan.Workspace, r.maxStaged())
	if err != nil {
		return nil, nil, err
	}
	seen := map[string]bool{}
	var paths []string
	for _, p := range append(now, then...) {
		if !seen[p] {
			seen[p] = true
			paths = append(paths, p)
		}
	}
	live, err := linux.TreeOf(r.ss.live)
	if err != nil {
		return nil, nil, err
	}
	defer live.Close()
	uid, gid, err := live.Owner()
	if err != nil {
		return nil, nil, err
	}
	same, err := cp.copy.Unchanged(filepath.Join(r.stageDir, stageUpperName), r.plan.Workspace, r.maxStaged())
	if err != nil {
		return nil, nil, err
	}
	want, err := r.checkpointView(cp)
	if err != nil {
		return nil, nil, err
	}
	defer want.Close()
	err = linux.WithoutReserve(func() (err error) {
		changed, problems, err = layer.Rollback(live, want, paths, same, uid, gid, r.maxStaged())
		return err
	})
	return changed, problems, err
}

// checkpointView is the workspace as it was at cp: cp's copy over the workspace, a
// read-only overlay mounted nowhere.
func (r *run) checkpointView(cp *checkpoint) (*linux.Tree, error) {
	top, err := linux.OpenDirNoLinks(cp.copy.Dir)
	if err != nil {
		return nil, err
	}
	defer top.Close()
	ws, err := linux.OpenDirNoLinks(r.plan.Workspace)
	if err != nil {
		return nil, err
	}
	defer ws.Close()
	view, err := linux.NewOverlayView(top, ws)
	if err != nil {
		return nil, err
	}
	defer view.Close()
	return linux.TreeOf(view)
}

// endStagedSession finishes a staged session's stage once nothing in its sandbox
// runs: its checkpoints go, and its changes wait for apply or discard.
func (r *run) endStagedSession() error {
	if r.stage == nil {
		return nil
	}
	if r.ss != nil {
		r.ss.mu.Lock()
		defer r.ss.mu.Unlock()
		r.ss.ended = true
	}
	if err := linux.RemoveTree(filepath.Join(r.stageDir, checkpointsName)); err != nil {
		return errdefs.Unavailablef("removing the checkpoints: %w", err)
	}
	return r.finishStage()
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
