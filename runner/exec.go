package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/user"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/audit/fsdiff"
	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/internal/layer"
	"github.com/cordonhq/cordon/internal/trace"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// errAuditFailed is the cancellation cause when the audit log cannot be written.
var errAuditFailed = errors.New("audit log failed")

// execOne runs one command in the run's sandbox and logs it as a cmd.start, cmd.end,
// fs.diff triple. A one-command run's monitor is drained before cmd.end so that its
// last alerts join it. Several execOne may run at once (sessions):
// the log, the sink and the monitor's kill switch have their own locks.
//
// In a one-command run on a sandbox that starts early, the sandbox builds itself while
// the monitor attaches, the workspace baseline is taken and cmd.start is written
// (see [run.setUpEarly]); the command runs only once all three are done. The command's
// timeout then counts from the start of that overlap.
func (r *run) execOne(ctx context.Context, argv []string, eo ExecOptions) (ExecResult, error) {
	if r.ss != nil {
		// "Undo the last command" is a rollback to this one.
		if _, err := r.checkpoint("", true); err != nil {
			return ExecResult{}, err
		}
	}
	timeout := r.execDefaults(&eo)
	var c command
	defer func() {
		if c.id != "" {
			r.sink.End(c.id)
			r.decidedFor(c.id) // ended without its result: nothing kept for it stays
		}
	}()
	var tracker *fsdiff.Tracker
	var win *window                           // a session's command's change set
	defer func() { r.endWindow(win, true) }() // when it ends unrecorded: its cgroup counts what it left
	// sctx ends the baseline early when the command changed nothing (see below).
	sctx, skipBaseline := context.WithCancel(ctx)
	defer skipBaseline()
	snapshot := func() (err error) {
		tracker, win, err = r.snapshotWorkspace(sctx)
		return err
	}
	begin := func() (err error) {
		c, err = r.beginCommand(argv, eo.Dir, nil)
		return err
	}
	actx, stop := r.commandContext(ctx, timeout)
	defer stop(nil)
	var ready func(context.Context) error
	wait := func() error { return nil }
	if r.early {
		r.startBarrier()
		if r.bar != nil {
			defer r.bar.shut()
		}
		ready, wait = r.setUpEarly(ctx, snapshot, begin, stop)
	} else if err := snapshot(); err != nil {
		return ExecResult{}, err
	} else if err := begin(); err != nil {
		return ExecResult{}, err
	}
	out, errOut := audit.NewCapture(0), audit.NewCapture(0)
	var res ExecResult
	if !r.early {
		res.CmdID = c.id // early, c is the setup's until wait has returned
	}
	if r.stage != nil && !r.session {
		r.stage.Started = layer.StartStamp(r.stageDir, r.o.now())
	}
	code, err := r.runUnlessMaskGone(actx, argv, eo, out, errOut, &res, ready)
	skipped, serr := r.setupEnded(ctx, sctx, err, skipBaseline, wait)
	if serr != nil {
		if c.id == "" || !startTimedOut(actx, serr) {
			return ExecResult{}, serr // the sandbox was killed before the command ran
		}
		code, err = 0, serr // its time ran out while the sandbox started: a timeout
	}
	c.tracker, c.win = tracker, win
	res.CmdID = c.id
	r.commandEnded(err, eo.Stderr)
	r.endWindow(win, res.ownCgroup)
	code, reason, err := classify(ctx, actx, code, err)
	if err != nil {
		return ExecResult{}, err
	}
	r.explainEnd(eo.Stderr, reason, timeout, actx, r.session && !res.ownCgroup)
	res.ExitCode, res.Reason, res.TimedOut = code, reason, reason == audit.ReasonTimeout
	if skipped {
		c.tracker = nil
		c.unchanged = true
	}
	r.recordEnd(ctx, c, &res, out.Output(), errOut.Output())
	if reason == audit.ReasonMonitor || errors.As(context.Cause(actx), new(*maskKill)) {
		res.Detail = context.Cause(actx).Error()
	}
	return res, nil
}

// runUnlessMaskGone is runCommand, unless a mask of the run went earlier (a
// session's: maskKill), after which no command runs.
func (r *run) runUnlessMaskGone(actx context.Context, argv []string, eo ExecOptions, out, errOut io.Writer, res *ExecResult, ready func(context.Context) error) (int, error) {
	if cause := context.Cause(actx); errors.As(cause, new(*maskKill)) {
		return 0, cause
	}
	return r.runCommand(actx, argv, eo, out, errOut, res, ready)
}

// setupEnded, once the command has ended (cmdErr: how), ends its baseline early when
// the barrier shows nothing changed (skip, which sctx sees), waits for the setup
// (wait) and returns its error: none for a baseline ended early. skipped says the
// diff is empty without the baseline; false when the baseline was complete before
// it could be ended (the diff then reads the change set).
func (r *run) setupEnded(ctx, sctx context.Context, cmdErr error, skip func(), wait func() error) (skipped bool, err error) {
	skipped = r.barrierEnd(cmdErr, skip)
	sp := trace.Begin("setup.wait")
	err = wait()
	sp.End()
	switch {
	case skipped && err != nil && sctx.Err() != nil && ctx.Err() == nil:
		return true, nil // the baseline was ended early, not failed
	case skipped && err == nil:
		return false, nil
	}
	return skipped, err
}

// execDefaults fills in what eo leaves out (the plan's working directory, empty
// input, discarded output) and returns the command's timeout.
func (r *run) execDefaults(eo *ExecOptions) time.Duration {
	if eo.Dir == "" {
		eo.Dir = r.plan.Workdir
	}
	timeout := time.Duration(r.plan.Timeout)
	if eo.Timeout > 0 {
		timeout = eo.Timeout
	}
	eo.Stdin, eo.Stdout, eo.Stderr = orEmpty(eo.Stdin), orDiscard(eo.Stdout), orDiscard(eo.Stderr)
	return timeout
}

// commandEnded takes the change set where it can be trusted (barrierEnd took it
// already with a barrier) and, in a one-command run, drains the monitor while the
// command is still the current one, so that its last alerts are joined to it; a
// failure to stop it is warned of on stderr.
func (r *run) commandEnded(err error, stderr io.Writer) {
	switch {
	case r.bar != nil && r.bar.taken.Load() && err == nil:
		// Taken by barrierEnd.
	case r.early && err == nil:
		// A one-command run's sandbox ended with its command (bwrap has been waited
		// for, its pid namespace with it): nothing is left to make a repository the
		// live watch would disarm before the diff's sweep does. Without a barrier no
		// one saw whether the command received a descriptor on a socket (barrierEnd),
		// through whose mapping it could write with no event: the diff walks.
		r.noChanges("no barrier saw the command's calls: a descriptor it received on a socket could write with no event the watch sees")
		r.takeChanges()
	default:
		r.noChanges("the sandbox may have outlived its command")
	}
	if r.session {
		return
	}
	sp := trace.Begin("monitor.stop")
	merr := r.stopMonitor(r.o.Log)
	sp.End()
	if merr != nil {
		r.o.Log.Warn("stopping the monitor", "err", merr)
		fmt.Fprintf(stderr, "cordon: warning: %v\n", merr)
	}
}

// recordEnd logs how the command ended (cmd.end, with its captured output) and its
// fs.diff, and waits for both to be durable as the sync policy says.
func (r *run) recordEnd(ctx context.Context, c command, res *ExecResult, stdout, stderr audit.Output) {
	r.sink.Flush(c.id) // its counts of attempts past the budgets precede its end
	sp := trace.Begin("audit.cmd_end")
	r.log.Emit(event.Event{Type: event.CmdEnd, Cmd: c.id, Body: audit.CmdEnd{
		ExitCode: res.ExitCode, DurationMS: res.Duration.Milliseconds(), Stdout: stdout, Stderr: stderr,
	}})
	sp.End()
	r.o.Log.Debug("command recorded")
	sp = trace.Begin("diff")
	r.recordDiff(ctx, c, res)
	sp.End()
	if !r.session {
		// A one-command run reports nothing before its seal, whose fsync makes
		// cmd.end and fs.diff durable (audit.SyncOneCommand) and waits for
		// cmd.end's own; a failure there fails the run (auditErr).
		return
	}
	// cmd.end's fsync ran beside the diff; fs.diff's waited for it, unless no fs.diff
	// was written. A failure fails the log, and the run with it (auditErr).
	sp = trace.Begin("audit.synced")
	_ = r.log.Synced()
	sp.End()
}

// command is what is known of a command before it runs: the workspace's baseline (nil
// for a staged one-command run, whose diff is taken from its change set) and its id in
// the log (the seq of its cmd.start).
type command struct {
	tracker *fsdiff.Tracker
	win     *window // a session's: its change set (sessionsets.go)
	id      string
	// unchanged: the change set says the command changed nothing, and its baseline
	// was ended unread (a run with a barrier): its diff is empty.
	unchanged bool
}

// snapshotWorkspace waits for run.start to be durable and takes the workspace's
// baseline (none for a staged one-command run: nil), and a session's command's window
// of its change sets (nil elsewhere).
func (r *run) snapshotWorkspace(ctx context.Context) (*fsdiff.Tracker, *window, error) {
	var ph trace.Seq
	defer ph.End()
	ph.Next("audit.wait_start")
	if err := r.log.WaitStart(); err != nil {
		return nil, nil, errdefs.Unavailablef("writing the audit log: %w", err)
	}
	if r.stage != nil && !r.session {
		// A staged run's diff is taken from its change set (stagedDiff): no baseline.
		r.o.Log.Debug("no workspace baseline: the staged diff reads the change set")
		return nil, nil, nil
	}
	ph.Next("baseline")
	tracker, win, err := r.baseline(ctx)
	if err != nil {
		return nil, win, errdefs.Unavailablef("snapshotting the workspace for the audit diff: %w", err)
	}
	r.o.Log.Debug("workspace baseline taken", "files", tracker.Baseline().Files, "read", tracker.Baseline().Read, "took", tracker.Baseline().Duration)
	r.watchOpens()
	return tracker, win, nil
}

// beginCommand writes the command's cmd.start, once its baseline (tracker, nil for a
// staged run) is taken; from then on the command is the sink's current one (until the
// caller pops it).
func (r *run) beginCommand(argv []string, dir string, tracker *fsdiff.Tracker) (command, error) {
	defer trace.Begin("audit.cmd_start").End()
	id, err := r.log.StartCmd(audit.CmdStart{Argv: argv, Cwd: dir, Env: envNames(r.plan)})
	if err != nil {
		return command{}, errdefs.Unavailablef("writing the audit log: %w", err)
	}
	r.sink.Begin(id)
	if r.gates != nil {
		r.gates.decided.open(id)
	}
	return command{tracker: tracker, id: id}, nil
}

// commandContext is one command's context: it ends at the timeout, when the monitor
// kills (stop's cause says which), or when the audit log fails.
func (r *run) commandContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelCauseFunc) {
	ectx, cancel := context.WithTimeout(ctx, timeout)
	actx, stop := context.WithCancelCause(ectx)
	disarm := r.armKill(stop)
	go func() {
		select {
		case <-r.log.Failed():
			stop(errAuditFailed)
		case <-actx.Done():
		}
	}()
	return actx, func(cause error) {
		disarm()
		stop(cause)
		cancel()
	}
}

// runCommand runs argv in the sandbox (a session's through process 1's control
// channel), its output going to eo's writers, capped when eo.Cap is set, and to the
// audit captures; it records the duration and the caps in res.
//
// ready, when set, is the sandbox's Process.Ready (a sandbox that starts early).
func (r *run) runCommand(ctx context.Context, argv []string, eo ExecOptions, out, errOut io.Writer, res *ExecResult, ready func(context.Context) error) (int, error) {
	p := sandbox.Process{Argv: argv, Dir: eo.Dir, Stdin: eo.Stdin, Ready: ready, Barrier: r.bar != nil}
	execFn := r.sb.Exec
	if r.ctl != nil {
		execFn = r.ctl.exec
		cg, err := r.commandCgroup(res.CmdID)
		if err != nil {
			return 0, err
		}
		if cg != nil {
			p.Cgroup, res.ownCgroup = cg.Dir, true
			defer r.releaseCgroup(res.CmdID, cg)
			// Ending the command (timeout, kill, cancel) kills all it started.
			stop := context.AfterFunc(ctx, func() { _ = cg.Kill() })
			defer stop()
		}
	}
	cout, cerr, finishCap := r.capStreams(res.CmdID, eo.Cap, eo.Stdout, eo.Stderr)
	p.Stdout, p.Stderr = io.MultiWriter(cout, out), io.MultiWriter(cerr, errOut)
	if r.bar != nil {
		p.Stdout, p.Stderr = r.bar.gateFor(p.Stdout, eo.Stdout), r.bar.gateFor(p.Stderr, eo.Stderr)
	}
	began := r.o.now()
	r.handOver(ctx) // a one-command run: process 1's hello, with the egress listener
	sp := trace.Begin("command")
	code, err := execFn(ctx, p)
	sp.End()
	if herr := r.handedOver(); herr != nil {
		code, err = 0, herr // the sandbox ran nothing: its egress could not be confined
	}
	res.Duration = r.o.now().Sub(began)
	finishCap(res)
	r.o.Log.Debug("command finished", "code", code, "err", err)
	return code, err
}

// commandCgroup gives a session's command its own cgroup when the sandbox can, and
// joins the cgroup to the command for the monitor's events.
func (r *run) commandCgroup(cmdID string) (*sandbox.CommandCgroup, error) {
	cg, err := r.sb.CommandCgroup("cmd-" + cmdID)
	if err != nil || cg == nil {
		return nil, err
	}
	r.sink.JoinCgroup(cg.ID, cmdID)
	return cg, nil
}

// releaseCgroup removes a command's cgroup once the command is over, or keeps it
// (processes it left in the background) until the session ends.
func (r *run) releaseCgroup(cmdID string, cg *sandbox.CommandCgroup) {
	// The cgroup stays joined to the command: the monitor's events reach user space a
	// little after they happen, possibly after the cgroup is gone.
	if cg.Empty() && cg.Rmdir() == nil {
		return
	}
	r.cgMu.Lock()
	r.cmdCgroups = append(r.cmdCgroups, cg)
	r.cgMu.Unlock()
}

// removeCommandCgroups kills and removes what commands left running in the background.
func (r *run) removeCommandCgroups() []error {
	r.cgMu.Lock()
	cgs := r.cmdCgroups
	r.cmdCgroups = nil
	r.cgMu.Unlock()
	var errs []error
	for _, cg := range cgs {
		if err := cg.Remove(); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// explainEnd tells the command's stderr why cordon ended it, if it did.
func (r *run) explainEnd(stderr io.Writer, reason string, timeout time.Duration, actx context.Context, groupOnly bool) {
	switch reason {
	case audit.ReasonTimeout:
		what := "everything it started"
		if groupOnly {
			what = "its process group (what left the group with setsid runs on until the session stops)"
		}
		fmt.Fprintf(stderr, "cordon: command timed out after %s and was killed with %s (commands.timeout)\n", timeout, what)
	case audit.ReasonAuditFail:
		fmt.Fprintf(stderr, "cordon: the audit log failed (%v); the command was stopped\n", r.log.Err())
	case audit.ReasonMonitor:
		fmt.Fprintf(stderr, "cordon: %v (monitor.on_violation: kill)\n", context.Cause(actx))
	case audit.ReasonError:
		if cause := context.Cause(actx); errors.As(cause, new(*maskKill)) {
			fmt.Fprintf(stderr, "cordon: %v\n", cause)
		}
	}
}

// recordDiff logs the command's fs.diff and summarises it, with the egress it was
// denied, in res.
func (r *run) recordDiff(ctx context.Context, c command, res *ExecResult) {
	var diff *fsdiff.Result
	var err error
	if r.stage != nil && !r.session {
		diff, err = r.stagedDiff(context.WithoutCancel(ctx))
	} else {
		diff, err = r.directDiff(context.WithoutCancel(ctx), c.tracker, c.unchanged, c.win)
	}
	if err == nil {
		r.o.Log.Debug("workspace diff taken", "changes", len(diff.Changes), "read", diff.Scan.Read, "took", diff.Scan.Duration)
		r.adopt(c.tracker, c.win)
		res.FilesChanged, res.Insertions, res.Deletions = len(diff.Changes), diff.Insertions, diff.Deletions
		for _, c := range diff.Changes {
			r.noteTurn(c.Path, c.OldPath)
		}
		var renamed []string
		if r.stage == nil {
			sp := trace.Begin("diff.quarantine")
			renamed = r.quarantine(diff) // a staged run's changes are disarmed as they land
			sp.End()
		}
		sp := trace.Begin("audit.fs_diff")
		err = r.log.RecordDiff(res.CmdID, diff, renamed)
		sp.End()
	}
	if err != nil {
		r.o.Log.Warn("recording the workspace diff", "err", err)
	}
	res.DeniedEgress, res.Denied, res.DeniedMore = r.sink.Denied(res.CmdID)
	res.Alerts = r.sink.Alerts(res.CmdID)
	res.Gates, res.GatesMore = r.decidedFor(res.CmdID)
	r.o.Log.Debug("diff recorded")
	if diff != nil {
		r.settle(len(diff.Changes))
	}
}

// settleChanges is the size of a diff past which a session's supervisor gives the
// memory it took back to the host once it is recorded.
const settleChanges = 2000

// settle returns the memory a session's large diff of changes took to the host. The
// supervisor is a host process outside the sandbox's memory limit that lives as long
// as the session: a diff's snapshots and paths (bounded by limits.diff) are garbage
// once recorded, but the Go runtime keeps their pages until its next collection,
// which a quiet session may not reach for a long time.
func (r *run) settle(changes int) {
	if r.session && changes >= settleChanges {
		debug.FreeOSMemory()
	}
}

// diffOptions are the workspace diff's options under plan: its bounds are the
// contract's limits.diff.
func diffOptions(plan *contract.Plan) fsdiff.Options {
	l := plan.Limits.Diff
	return fsdiff.Options{
		GitDir:       plan.Git == contract.GitCommit,
		MaxEntries:   int(min(l.Entries, math.MaxInt32)),
		MaxFileHash:  l.HashFile,
		MaxHashBytes: l.HashTotal,
		MaxPatch:     int(min(l.Patch, math.MaxInt32)),
		Timeout:      l.Time,
	}
}

func envNames(p *contract.Plan) []string {
	names := make([]string, 0, len(p.Env))
	for _, e := range p.Env {
		names = append(names, e.Name)
	}
	sort.Strings(names)
	return names
}

// openAudit creates the run's log and writes run.start, which names uid, the sandbox's
// host uid (0: unknown). An audit root that cannot be written, or that lies inside the
// workspace, refuses the run.
func openAudit(plan *contract.Plan, o *Options, runID string, uid int, sync audit.SyncPolicy) (*audit.Writer, error) {
	root := o.AuditRoot
	if root == "" {
		var err error
		if root, err = audit.DefaultRoot(); err != nil {
			return nil, errdefs.Unavailablef("no audit root: %w (use --audit-dir)", err)
		}
	}
	if w, ok := writableBy(plan, root); ok {
		where := w + ", which the sandbox may write"
		if w == plan.Workspace {
			where = "the workspace " + w
		}
		return nil, errdefs.Invalidf("the audit root %s is inside %s; the log must be out of the sandbox's reach", root, where)
	}
	red := audit.NewRedactor()
	for _, kv := range o.Secrets {
		if name, value, ok := strings.Cut(kv, "="); ok {
			_ = red.Add(name, value) // values too short to redact safely are refused
		}
	}
	host, _ := os.Hostname()
	// run.start is made durable while the run starts; beginCommand waits for it.
	w, err := audit.Create(root, runID, audit.Options{Redactor: red, StartSyncLater: true, Sync: sync,
		MaxPatchStored: plan.Limits.Diff.PatchRun, Start: audit.RunStart{
			ContractPath: plan.ContractFile, ContractDigest: plan.ContractDigest,
			Backend: o.Backend.Name(), CordonVersion: o.Version, Host: host, User: userName(),
			Workspace: plan.Workspace, SandboxUID: uid,
		}})
	if err != nil {
		return nil, errdefs.Unavailablef("audit log: %w", err)
	}
	return w, nil
}

// writableBy returns the host directory the sandbox of plan may write (the workspace, a
// widened path) that holds p, links resolved; ok is false when there is none.
func writableBy(plan *contract.Plan, p string) (string, bool) {
	for _, m := range plan.Mounts {
		if m.Type != contract.Bind || m.Access != contract.ReadWrite {
			continue // a tmpfs is the sandbox's own, not a host directory
		}
		dir := m.Path
		if rd, err := resolveExistingPrefix(dir); err == nil {
			dir = rd
		}
		if inside(p, dir) {
			return m.Path, true
		}
	}
	return "", false
}

func inside(p, dir string) bool {
	if rp, err := resolveExistingPrefix(p); err == nil {
		p = rp
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

func userName() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return strconv.Itoa(os.Geteuid())
}
