package runner

import (
	"context"

	"github.com/cordonhq/cordon/audit/fsdiff"
)

// A session's commands take their diffs from the live watch's change set, as a direct
// run's does (changeset_linux.go), and so do their baselines: the session's snapshot
// of its workspace (run.ws) is brought forward at a command's start by reading what
// changed since the last set was taken, not by a walk. The watch records every change
// of the workspace's file system for the session's life, and the opening of files
// while a command runs (a write through a shared mapping makes no other event).
//
// A set stands for a walk only if nothing could have written with no event while it
// was recorded: no process of the sandbox held a file open from before it began. So a
// command's set is used when, as it started, no process of the session was left
// (every earlier command's cgroup was empty) and no other command ran beside it; the
// set of the time between two commands when the first left none. Whatever breaks
// that (processes left in the background, commands at once, a command with no cgroup
// of its own, a set that overflowed, a snapshot older than the last set) makes the
// diff or the fork walk, and the fs.diff line's scan.walked says why. Every set is
// taken right before the snapshot it brings forward or the walk that replaces it is
// read, so that the snapshot and the set recorded since always hold every change.

// window is one session command's part of the change sets.
type window struct {
	gen   uint64 // sessionSets.gen as it started
	start uint64 // the take its baseline was brought forward from
	// opens: the watch recorded opens from before the command ran, and no process of
	// the session was left then; else whyNot says why its diff must walk.
	opens  bool
	whyNot string
	ended  bool
	// Set as it ends: the take its diff's snapshot is current as of, and its change
	// set, or why its diff walks; the files its diff reads again whatever their stat
	// data say, and whether that is their last time (nothing was left alive).
	end      uint64
	watched  *fsdiff.Watched
	why      string
	reread   fsdiff.Reread
	lastHeld bool
}

// sessionSets is a session's state of its change sets; guarded by run.wsMu.
type sessionSets struct {
	takes  uint64 // sets taken so far
	wsTake uint64 // the take the session's snapshot (run.ws) is current as of
	// dirty says why the set recorded since the last take may miss a change (a
	// process of the sandbox was left as it was taken); "" when it may not.
	dirty   string
	running int    // commands between their start and end windows
	gen     uint64 // bumped when a command starts beside another
	opens   bool   // the watch records opens
	// off says why the session uses no change set any more: a command ran with no
	// cgroup of its own (a Pod's), so what it left running cannot be known; the
	// watch records creations only from then on, and every snapshot walks.
	off string
	// held are the files a live process may hold mapped (sessionheld.go).
	held heldFiles
}

// sessionSets reports whether a session may use change sets: a direct session with a
// live watch (as root; a staged session's diff is of its overlay).
func (r *run) sessionSets() bool { return r.session && !r.o.Stage && r.live != nil }

// trackTake takes the set before the session's first snapshot is read; the caller
// holds wsMu.
func (r *run) trackTake() {
	if r.sessionSets() {
		r.takeSet()
		r.sw.wsTake, r.sw.dirty = r.sw.takes, ""
		r.idle()
	}
}

// idleEvents bounds the events a session's watch reads between two commands with
// nothing of the sandbox running (linux.CreateWatch.IdleAfter): past them it stops
// recording changes, and the next command's snapshot walks. A few `cordon run`s
// beside the session, or a `git checkout` of the host's, are past it: at 20,000 an
// idle session made each `cordon run` beside it take 60 ms instead of 40 on the 2-core
// VM of the benchmarks (the supervisor placing every event of its new directories).
const idleEvents = 2_000

// forkLocked brings the session's snapshot forward as a command starts and forks the
// command's baseline from it, from the change set when it can stand for a walk; since
// is what changed meanwhile. The caller holds wsMu and, once forkLocked has returned
// a window, ends it (endWindow).
func (r *run) forkLocked(ctx context.Context) (fork *fsdiff.Tracker, since *fsdiff.Result, w *window, err error) {
	w = &window{gen: r.sw.gen, whyNot: "no change set"}
	if r.sw.running++; r.sw.running > 1 {
		r.sw.gen++
	}
	if !r.sessionSets() || r.sw.off != "" {
		if r.sw.off != "" {
			w.whyNot = r.sw.off
		}
		fork, since, err = r.ws.Fork(ctx)
		return fork, since, w, err
	}
	alive := r.aliveLocked(1)
	stale := ""
	if r.sw.wsTake != r.sw.takes {
		stale = "the session's snapshot is older than its last change set"
	}
	r.busy()
	set, untrusted := r.takeSet()
	w.start = r.sw.takes
	if alive != "" {
		r.sw.held.add(set, untrusted)
	}
	r.ws.Reread(r.sw.held.reread())
	why := firstReason(r.sw.dirty, stale, untrusted)
	if why == "" {
		fork, since, why, err = r.ws.ForkWatched(ctx, set)
	}
	if err == nil && fork == nil {
		r.o.Log.Debug("the session's snapshot walked", "why", why)
		fork, since, err = r.ws.Fork(ctx)
	}
	if err != nil {
		r.sw.dirty = "a snapshot failed"
		return nil, nil, w, err
	}
	r.sw.wsTake, r.sw.dirty = w.start, alive
	if alive == "" {
		// Nothing was left to write unseen since the held files were last read:
		// this snapshot read them once more.
		r.sw.held.clear()
	}
	// Opens are recorded whenever a process of the sandbox may run: from before
	// the first command starts to the end of the last one that leaves none.
	oerr := r.sessionOpens(true)
	if oerr == nil {
		r.sw.opens = true
	}
	switch {
	case alive != "":
		w.whyNot = alive
	case oerr != nil:
		w.whyNot = oerr.Error()
	default:
		w.opens, w.whyNot = true, ""
	}
	return fork, since, w, nil
}

// endWindow takes the command's change set once it has ended: its diff's, when
// nothing could have written unseen while it ran. ownCgroup says the command had a
// cgroup of its own (else what it left running cannot be known). Idempotent.
func (r *run) endWindow(w *window, ownCgroup bool) {
	r.wsMu.Lock()
	defer r.wsMu.Unlock()
	if w == nil || w.ended {
		return
	}
	w.ended = true
	r.sw.running--
	if !r.sessionSets() {
		w.why = w.whyNot
		return
	}
	if !ownCgroup && r.sw.off == "" {
		r.sw.off, r.sw.opens = uncountedWhy, false
		r.stopSets(uncountedWhy)
	}
	if r.sw.off != "" {
		w.why = r.sw.off
		return
	}
	// Whether a process is left is known before opens stop being recorded: one that
	// opened a file after that, wrote through a mapping and exited before the look
	// would leave its write in no set.
	alive := r.aliveLocked(0)
	if r.sw.opens && alive == "" {
		// Before the take: cordon's own reads of what changed are no change.
		_ = r.sessionOpens(false) // a failure distrusts the set
		r.sw.opens = false
	}
	set, untrusted := r.takeSet()
	w.end = r.sw.takes
	r.sw.dirty = alive
	if alive != "" {
		r.sw.held.add(set, untrusted)
	}
	// The diff reads the held files again; with none alive, for the last time once
	// it is adopted.
	w.reread, w.lastHeld = r.sw.held.reread(), alive == ""
	if alive == "" {
		r.idle()
	}
	ran := ""
	if w.gen != r.sw.gen || w.start+1 != w.end {
		ran = "another command of the session ran meanwhile"
	}
	if !w.opens {
		w.why = w.whyNot
	} else if w.why = firstReason(ran, untrusted); w.why == "" {
		w.watched = &set
	}
}

const uncountedWhy = "a command of the session ran with no cgroup of its own: what it left running is not known"

// aliveLocked says why a process of the sandbox may be alive beside the commands
// still running: other commands (past others, besides the caller's), one a command
// left in the background, one no cgroup counts; "" when none can be.
func (r *run) aliveLocked(others int) string {
	switch {
	case r.sw.running > others:
		return "another command of the session is running"
	case r.leftRunning():
		return "a command of the session left processes running"
	}
	return ""
}

// leftRunning reports whether a session command's cgroup still holds a process;
// those found empty are removed.
func (r *run) leftRunning() bool {
	r.cgMu.Lock()
	defer r.cgMu.Unlock()
	kept := r.cmdCgroups[:0]
	for _, cg := range r.cmdCgroups {
		if cg.Empty() && cg.Rmdir() == nil {
			continue
		}
		kept = append(kept, cg)
	}
	clear(r.cmdCgroups[len(kept):])
	r.cmdCgroups = kept
	return len(kept) > 0
}

func firstReason(whys ...string) string {
	for _, w := range whys {
		if w != "" {
			return w
		}
	}
	return ""
}
