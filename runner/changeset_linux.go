package runner

import (
	"context"
	"math"
	"os"
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
// one-command run (a session's commands have sets of their own, sessionsets.go; a
// staged run's diff is of its own change set).
func (r *run) wantsChanges() bool { return !r.session && !r.o.Stage }

// watchFor starts the live watch of the workspace, recording its changes when the
// run's diffs may use them: a direct one-command run's, a direct session's
// (sessionsets.go).
func (r *run) watchFor(keep func(string, bool) bool) (*linux.CreateWatch, error) {
	if r.o.Stage {
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
	r.live.mu.Lock()
	defer r.live.mu.Unlock()
	if r.live.taken {
		return // a baseline that ended after its command (a barrier's): nothing to open
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
	r.live.mu.Lock()
	r.live.taken = true
	r.live.mu.Unlock()
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

// nothingChanged says why the change set does not show that the command changed
// nothing in the workspace ("" when it does): it is trusted and empty, and the
// workspace is still one file system (no mount made below it meanwhile) under the
// same directory. Only a run with a barrier asks: its command changed nothing before
// the change set's watch was in place, and an mmap write needs a write open, which
// the barrier holds until the baseline is read and the opens watched.
func (r *run) nothingChanged() string {
	switch {
	case r.watched == nil || r.walkWhy != "":
		return "no change set"
	case len(r.watched.Paths) > 0 || len(r.watched.Objects) > 0:
		return "the change set is not empty"
	case r.bar == nil || r.bar.root == nil:
		return "no barrier"
	}
	if why := linux.ReportsChanges(r.plan.Workspace); why != "" {
		return why
	}
	now, err := os.Stat(r.plan.Workspace)
	if err != nil || !os.SameFile(now, r.bar.root) {
		return "the workspace's directory was replaced"
	}
	return ""
}

// directDiff is the command's diff: from the change set when there is one that can be
// trusted, else from a walk, which then says why it walked. unchanged (the change set
// is empty, nothingChanged, and the baseline was ended unread) makes it empty: the
// scan's counts are then unknown, and say so. A session's command has its own change
// set, in win (nil elsewhere).
func (r *run) directDiff(ctx context.Context, tracker *fsdiff.Tracker, unchanged bool, win *window) (*fsdiff.Result, error) {
	if unchanged {
		r.o.Log.Debug("the workspace diff is empty: nothing changed, the baseline was not waited for")
		return &fsdiff.Result{Scan: fsdiff.ScanStats{Watched: true, Unread: true}}, nil
	}
	why, watched, says := r.walkWhy, r.watched, r.wantsChanges()
	if win != nil {
		why, watched, says = win.why, win.watched, r.sessionSets()
		tracker.Reread(win.reread)
	}
	if watched != nil && why == "" {
		sp := trace.Begin("diff.watched")
		res, w, err := tracker.DiffWatched(ctx, *watched)
		sp.End()
		if err != nil || w == "" {
			return res, err
		}
		why = w
	}
	if why == "" && says {
		why = "no change set"
	}
	sp := trace.Begin("diff.walk")
	res, err := tracker.Diff(ctx)
	sp.End()
	if err == nil && says {
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

// takeSet takes the live watch's change set for a session (sessionsets.go) and counts
// the take; untrusted says why the set cannot stand for a walk. Like takeChanges, it
// waits for the watch's disarms, whose directories it adds. The caller holds wsMu.
func (r *run) takeSet() (set fsdiff.Watched, untrusted string) {
	r.sw.takes++
	defer trace.Begin("changes.take").End()
	c := r.live.w.TakeChanges()
	if !r.live.waitHandled(r.live.w.Sent(), 5*time.Second) {
		return fsdiff.Watched{}, "the live watch's disarms did not finish"
	}
	if c.Untrusted != "" {
		return fsdiff.Watched{}, c.Untrusted
	}
	r.live.mu.Lock()
	for _, rel := range r.live.done {
		c.Paths[path.Dir(rel)] = true
	}
	r.live.mu.Unlock()
	return fsdiff.WatchedFrom(c.Paths, c.Objects), ""
}

// sessionOpens starts (on) or stops recording the opening of files in a session's
// change set; a failure distrusts the set being recorded.
func (r *run) sessionOpens(on bool) error {
	if on {
		return r.live.w.WatchOpens(r.plan.Workspace)
	}
	return r.live.w.UnwatchOpens(r.plan.Workspace)
}

// idle bounds what the session's watch costs until the next command (idleEvents);
// busy undoes it, before a command's take.
func (r *run) idle() { r.live.w.IdleAfter(idleEvents) }

func (r *run) busy() {
	if err := r.live.w.Busy(); err != nil {
		r.o.Log.Warn("the session's change sets are no longer used", "err", err)
	}
}

// stopSets stops recording changes for the rest of the session (creations are still
// reported), for why.
func (r *run) stopSets(why string) {
	if err := r.live.w.StopChanges(why); err != nil {
		r.o.Log.Debug("the session's watch still records changes", "err", err)
	}
}
