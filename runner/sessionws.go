package runner

import (
	"context"

	"github.com/cordonhq/cordon/audit/fsdiff"
	"github.com/cordonhq/cordon/internal/linux"
)

// A session's workspace: one snapshot (run.ws) brought forward before each command,
// whose fork is the command's baseline and whose diff's snapshot it adopts; what
// changed in between is logged between commands.

// baseline snapshots the workspace before a command. A session keeps one tracker of
// the workspace and forks it, so that each command's baseline re-reads only the files
// changed since the last snapshot (the change set says which, or a stat walk finds
// them) instead of every file; win is the command's window of the session's change
// sets (sessionsets.go), which the caller ends (endWindow), even on error.
func (r *run) baseline(ctx context.Context) (_ *fsdiff.Tracker, win *window, _ error) {
	opts := diffOptions(r.plan)
	if !r.session {
		if r.bar != nil {
			opts.Hurry = r.bar.hurry
		}
		t, err := fsdiff.New(ctx, r.plan.Workspace, opts)
		return t, nil, err
	}
	// What the sandbox's commands wrote where the host does not see it (a Pod's
	// workspace) is brought back first: a background process's change since the last
	// command is then logged between commands, not as this command's.
	if err := r.sb.SyncWorkspace(ctx, false); err != nil {
		return nil, nil, err
	}
	r.wsMu.Lock()
	defer r.wsMu.Unlock()
	if err := r.trackLocked(ctx, opts); err != nil {
		return nil, nil, err
	}
	fork, since, win, err := r.forkLocked(ctx)
	if err != nil {
		return nil, win, err
	}
	r.recordBetween(since)
	return fork, win, nil
}

// trackWorkspace takes a session's first snapshot of its workspace as the session
// starts: what changes before its first command is then logged between commands
// (recordBetween), as is any change after one, and the first command's baseline is a
// fork of it, as every later command's is (a warm session's first exec skips the
// full read). A snapshot that fails here is taken by the first command, which then
// fails as it did before.
func (r *run) trackWorkspace(ctx context.Context) {
	r.wsMu.Lock()
	defer r.wsMu.Unlock()
	if err := r.trackLocked(ctx, diffOptions(r.plan)); err != nil {
		r.o.Log.Debug("no workspace snapshot at the session's start", "err", err)
	}
}

// trackLocked makes the session's tracker of its workspace when there is none; the
// caller holds wsMu.
func (r *run) trackLocked(ctx context.Context, opts fsdiff.Options) error {
	if r.ws != nil {
		return nil
	}
	root := r.plan.Workspace
	if r.ss != nil {
		// A staged session's workspace is the overlay its sandbox writes: one
		// command's end is the next one's start, read through it.
		root = linux.FDPath(r.ss.live)
	}
	r.trackTake()
	t, err := fsdiff.New(ctx, root, opts)
	if err != nil {
		return err
	}
	r.ws = t
	return nil
}

// recordBetween logs what changed in a session's workspace since the last snapshot
// (the end of the previous command's diff, or the start of the session): changes no
// command's diff holds. They are attributed to the commands running meanwhile, or to
// none, "between commands". The log has no gaps.
func (r *run) recordBetween(since *fsdiff.Result) {
	if since == nil || len(since.Changes) == 0 {
		r.masksBetween(since)
		return
	}
	for _, c := range since.Changes {
		r.noteTurn(c.Path, c.OldPath)
	}
	defer r.settle(len(since.Changes))
	var renamed []string
	if r.stage == nil {
		renamed = r.quarantine(since) // a staged session's changes are disarmed as they land
	}
	if err := r.log.RecordDiffBetween(since, r.sink.Running(), renamed); err != nil {
		r.o.Log.Warn("recording the workspace diff between commands", "err", err)
	}
}

// closeBetween records what changed since the last command's diff, as a session ends.
func (r *run) closeBetween(ctx context.Context) {
	if !r.session {
		return
	}
	r.wsMu.Lock()
	defer r.wsMu.Unlock()
	if r.ws == nil {
		r.masksBetween(nil)
		return
	}
	r.ws.Reread(r.sw.held.reread())
	_, since, err := r.ws.Fork(context.WithoutCancel(ctx))
	if err != nil {
		since = nil
	}
	r.recordBetween(since)
}

// masksBetween renames aside what stands where one of the run's masks was
// (maskedGone) when no diff between commands is there to quarantine (recordBetween):
// one with no change, as one whose entries bound ends before the mask's path does,
// sees nothing the sandbox put there, and at a session's stop nothing looks later (the
// live watch's queue is not read once the sandbox is gone). since may be nil.
func (r *run) masksBetween(since *fsdiff.Result) {
	if r.stage != nil {
		return // a staged session's masks rest on its overlay, not on the workspace
	}
	renamed := r.maskedGone()
	if len(renamed) == 0 {
		return
	}
	if since == nil {
		since = &fsdiff.Result{}
	}
	if err := r.log.RecordDiffBetween(since, r.sink.Running(), renamed); err != nil {
		r.o.Log.Warn("recording the workspace diff between commands", "err", err)
	}
}

// adopt keeps a session's tracker at the latest snapshot, a command's end state, as
// of its window's end (win; nil outside a session): a snapshot brought forward from a
// later change set is not replaced by an older one.
func (r *run) adopt(t *fsdiff.Tracker, win *window) {
	if !r.session {
		return
	}
	r.wsMu.Lock()
	defer r.wsMu.Unlock()
	if win != nil && r.sessionSets() {
		if win.end < r.sw.wsTake {
			return
		}
		r.sw.wsTake = win.end
		if win.lastHeld && r.sw.takes == win.end {
			r.sw.held.clear() // t read them after the last process that could hold them
		}
	}
	r.ws.Adopt(t)
}
