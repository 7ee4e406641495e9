package runner

import (
	"context"
	"math"
	"path"
	"time"

	"github.com/cordonhq/cordon/audit/fsdiff"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/trace"
)

// A direct one-command run's diff reads only what the kernel reported changed while
// the command ran (fsdiff's DiffWatched), from the live watch's group, which records
// every change of the workspace's file system as well as new repositories
// (linux.WatchChanges). Whenever that report cannot be trusted the diff walks the
// workspace as before, and says why (the fs.diff line's scan.walked, the debug log,
// the trace's diff.walk span).

// wantsChanges reports whether the run's diff may come from the watch: a direct
// one-command run (a session's commands walk, as does a staged run's change set).
func (r *run) wantsChanges() bool { return !r.session && !r.o.Stage }

// watchFor starts the live watch of the workspace, recording its changes when the
// run's diff may use them.
func (r *run) watchFor(keep func(string, bool) bool) (*linux.CreateWatch, error) {
	if !r.wantsChanges() {
		return linux.WatchCreates(r.plan.Workspace, keep)
	}
	if why := linux.ReportsChanges(r.plan.Workspace); why != "" {
		r.noChanges(why)
		return linux.WatchCreates(r.plan.Workspace, keep)
	}
	// Past as many paths as a snapshot may record, reading them would cost a walk.
	n := int(min(r.plan.Limits.Diff.Entries, math.MaxInt32))
	if n <= 0 {
		n = fsdiff.DefaultMaxEntries
	}
	return linux.WatchChanges(r.plan.Workspace, keep, n)
}

// watchOpens adds the opening of files to the watch, once the baseline has read the
// workspace and before the command runs.
func (r *run) watchOpens() {
	if r.live == nil || !r.wantsChanges() {
		return
	}
	if err := r.live.w.WatchOpens(r.plan.Workspace); err != nil {
		r.o.Log.Debug("the change set will not be used", "err", err)
	}
}

// noChanges makes the diff walk, for why.
func (r *run) noChanges(why string) {
	if r.wantsChanges() && r.walkWhy == "" {
		r.walkWhy = why
	}
}

// takeChanges takes the change set once the command and its sandbox are gone (a
// one-command run's sandbox ends with its command), waits until the live watch has
// disarmed what it read (those renames are changes of the workspace too: their
// directories are read whole), then stops the watch as before (stopWatchSoon).
func (r *run) takeChanges() {
	if r.live == nil || !r.wantsChanges() {
		r.stopWatchSoon()
		return
	}
	sp := trace.Begin("changes.take")
	c := r.live.w.Changes()
	if !r.live.waitHandled(r.live.w.Sent(), 5*time.Second) {
		c = linux.Changes{Untrusted: "the live watch's disarms did not finish"}
	}
	sp.End()
	r.stopWatchSoon()
	if c.Untrusted != "" {
		r.noChanges(c.Untrusted)
		return
	}
	r.live.mu.Lock()
	for _, rel := range r.live.done {
		c.Paths[path.Dir(rel)] = true
	}
	r.live.mu.Unlock()
	w := fsdiff.WatchedFrom(c.Paths, c.Objects)
	r.watched = &w
}

// directDiff is the command's diff: from the change set when there is one that can be
// trusted, else from a walk, which then says why it walked.
func (r *run) directDiff(ctx context.Context, tracker *fsdiff.Tracker) (*fsdiff.Result, error) {
	why := r.walkWhy
	if r.watched != nil && why == "" {
		sp := trace.Begin("diff.watched")
		res, w, err := tracker.DiffWatched(ctx, *r.watched)
		sp.End()
		if err != nil || w == "" {
			return res, err
		}
		why = w
	}
	if why == "" && r.wantsChanges() {
		why = "no change set"
	}
	sp := trace.Begin("diff.walk")
	res, err := tracker.Diff(ctx)
	sp.End()
	if err == nil && r.wantsChanges() {
		r.o.Log.Debug("the workspace diff walked", "why", why)
		res.Scan.Walked = why
	}
	return res, err
}

// handledOne counts one event handled.
func (lw *liveWatch) handledOne() {
	lw.handled.Add(1)
	select {
	case lw.progress <- struct{}{}:
	default:
	}
}

// waitHandled waits until the watch's reader has handled n events (its disarms done),
// for at most maxWait; false when it has not.
func (lw *liveWatch) waitHandled(n uint64, maxWait time.Duration) bool {
	timer := time.NewTimer(maxWait)
	defer timer.Stop()
	for lw.handled.Load() < n {
		select {
		case <-lw.progress:
		case <-timer.C:
			return lw.handled.Load() >= n
		}
	}
	return true
}
