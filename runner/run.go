package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/audit/fsdiff"
	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/creds"
	"github.com/cordonhq/cordon/gate"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/internal/trace"
	"github.com/cordonhq/cordon/internal/uids"
	"github.com/cordonhq/cordon/runner/sandbox"
	"github.com/cordonhq/cordon/runner/tally"
)

// Options configure one run. Zero fields mean defaults.
type Options struct {
	Backend sandbox.Backend // required
	Stdin   io.Reader
	Stdout  io.Writer
	Stderr  io.Writer
	// Timeout overrides the plan's per-command timeout when positive.
	Timeout time.Duration
	// RunRoot holds run directories; "" means paths.RunRoot() ($CORDON_RUN_ROOT or the default).
	RunRoot string
	// AuditRoot holds the audit logs; "" means audit.DefaultRoot(). It must not be
	// inside the workspace, and the sandbox never sees it.
	AuditRoot string
	// Init is cordon's static binary to run as process 1; "" means this executable.
	Init string
	// Version is cordon's version, recorded in run.start.
	Version string
	// Secrets are caller environment values the scrub removed that look like
	// credentials (NAME=value): every logged byte has them redacted.
	Secrets []string
	// Log receives cordon's own diagnostics; nil discards them.
	Log *slog.Logger
	// Events receives a copy of every event (for `cordon run -v`); nil means none.
	Events event.Sink
	// Gates is how the contract's approval gates are decided: a person (gate.Ask, the
	// default) or refused at once (gate.DenyAll, `--gates deny`).
	Gates gate.Mode
	// Stage runs the command against a copy-on-write view of the workspace: the real
	// workspace is untouched, and the changes wait in the run's stage for Apply or
	// Discard (backends whose sandbox.Backend.CanStage says they can). A staged session
	// also keeps checkpoints to roll back to (Session.Checkpoint, Session.Rollback).
	Stage bool

	now func() time.Time // or nil for time.Now
	// uidPool leases sandboxes their host uids; nil means the host's (uids.Default).
	uidPool *uids.Pool
	// beforeCommand, when set, runs in a one-command run's early setup after the
	// monitor attached (tests fail that branch with it).
	beforeCommand func() error
}

// Result is how a run ended.
type Result struct {
	RunID    string
	ExitCode int // the command's status, 124 on timeout, 128+n when cordon got signal n
	TimedOut bool
	Duration time.Duration
	AuditDir string // where the run's log is
	// Denied lists the destinations the egress proxy refused the command, once each.
	Denied []Denial
	// DeniedMore counts the command's refusals Denied does not explain (past its first
	// 1000; see ExecResult.DeniedMore).
	DeniedMore int
	// Alerts lists the run's monitor alerts, once per category, target and syscall.
	Alerts []Alert
	// Staged, for a staged run, is how many changes wait for Apply or Discard.
	Staged int
	// FilesChanged, Insertions and Deletions summarise the command's fs.diff.
	FilesChanged, Insertions, Deletions int
}

// Run executes argv in a fresh sandbox built from plan, records it in the audit log,
// and tears everything down before it returns, whatever happens. It is a session with
// one command, which process 1 runs itself: the same start, command and close as a
// session's, without the control channel. Errors wrap an errdefs category; a command that
// ran and failed is not an error (see Result.ExitCode).
func Run(ctx context.Context, plan *contract.Plan, argv []string, o Options) (Result, error) {
	if err := checkCommand(plan, argv); err != nil {
		return Result{}, err
	}
	s, err := start(ctx, plan, o, false)
	if err != nil {
		return s.result(), err
	}
	r := s.r
	defer r.teardownOnPanic(ctx)
	res, err := s.Exec(ctx, argv, ExecOptions{Stdin: r.o.Stdin, Stdout: r.o.Stdout, Stderr: r.o.Stderr, Timeout: r.o.Timeout})
	if code, reason, ok := signalled(ctx); err != nil && ok {
		// cordon was interrupted while it readied the command (the sandbox, the
		// baseline, cmd.start): it ends as a signal ends a run, the command not run.
		res, err = ExecResult{ExitCode: code, Reason: reason, Detail: "interrupted before the command ran"}, nil
	}
	if err == nil && r.stage != nil {
		// The command and everything it started have ended: nothing writes the
		// upper directory any more.
		err = r.finishStage()
	}
	if err == nil {
		r.finish(res.ExitCode, res.Reason, res.Detail)
		r.end.Staged = r.stage.waits()
		r.res.TimedOut, r.res.Denied, r.res.DeniedMore = res.TimedOut, res.Denied, res.DeniedMore
		r.res.FilesChanged, r.res.Insertions, r.res.Deletions = res.FilesChanged, res.Insertions, res.Deletions
	}
	if terr := s.close(ctx, err); terr != nil {
		// The command's status stands; what is left is said here and in run.end, and
		// cordon gc removes it.
		fmt.Fprintf(r.o.Stderr, "cordon: warning: %v\n", terr)
	}
	r.res.Alerts = r.sink.Alerts("") // the monitor is closed: every alert has been read
	if err != nil {
		return r.res, err
	}
	return r.res, r.auditErr()
}

// result is what a run that could not start says: its id and log, when it got that far.
func (s *Session) result() Result {
	if s == nil {
		return Result{}
	}
	return s.r.res
}

// checkCommand refuses an empty command or one the contract's commands.deny rules name,
// before anything is started or logged.
func checkCommand(plan *contract.Plan, argv []string) error {
	if len(argv) == 0 {
		return errdefs.Invalidf("no command given")
	}
	if rule := plan.DeniedBy(argv); rule != nil {
		return errdefs.Deniedf("command denied by contract rule %q (%s)", rule.Pattern, rule.Where)
	}
	return nil
}

// start is the one preamble of Run and StartSession: it checks the backend, names the
// run, prepares its services and sandbox and, for a session (serve), starts process 1
// taking commands. On failure everything acquired is released and the log sealed with
// the reason; the Session returned then still says where the log is (nil when the run was
// never named).
func start(ctx context.Context, plan *contract.Plan, o Options, serve bool) (*Session, error) {
	o.defaults()
	var ph trace.Seq
	ph.Next("backend.check")
	if err := o.Backend.Check(ctx); err != nil {
		return nil, err
	}
	r := &run{plan: plan, o: &o, start: o.now(), session: serve}
	r.res.RunID = audit.NewRunID(r.start)
	ph.Next("uid.lease")
	r.leaseUID()
	if r.uidErr == nil {
		ph.Next("backend.warm")
		if release := o.Backend.Warm(plan, r.uid.leased); release != nil {
			r.undo.add("releasing what the backend began", func(context.Context) error { release(); return nil })
		}
	}
	ph.End()
	s := &Session{r: r, serveDone: make(chan struct{})}
	defer r.teardownOnPanic(ctx)
	err := r.prepare(ctx)
	if err == nil && serve {
		sp := trace.Begin("session.serve")
		err = s.serve(ctx)
		sp.End()
	}
	if err == nil && serve && r.stage != nil {
		err = r.openStagedSession()
	}
	if err == nil && serve {
		r.trackWorkspace(ctx)
	}
	if err != nil {
		if terr := r.teardown(ctx, err); terr != nil {
			fmt.Fprintf(r.o.Stderr, "cordon: warning: %v\n", terr)
		}
		return s, err
	}
	return s, nil
}

// teardownOnPanic, deferred, tears the run down when a panic goes through: credentials
// are revoked and nothing is left running before the panic goes on.
func (r *run) teardownOnPanic(ctx context.Context) {
	if p := recover(); p != nil {
		r.teardown(ctx, fmt.Errorf("panic: %v", p))
		panic(p)
	}
}

// orEmpty is r, or an empty stdin for nil.
func orEmpty(r io.Reader) io.Reader {
	if r == nil {
		return strings.NewReader("")
	}
	return throughPipe(r)
}

// throughPipe keeps a host file or socket out of the sandbox: a command could reopen
// it through /proc/self/fd (for writing, too) or use it as more than its input. The
// backend then gives the sandbox a pipe and copies. A pipe, a terminal and /dev/null
// pass as they are: reopening them reaches nothing more.
func throughPipe(r io.Reader) io.Reader {
	f, ok := r.(*os.File)
	if !ok {
		return r
	}
	if fi, err := f.Stat(); err == nil && fi.Mode()&(os.ModeNamedPipe|os.ModeCharDevice) != 0 {
		return r
	}
	return struct{ io.Reader }{f}
}

// pipeWriter is w as a writer that is not an *os.File, so that a backend gives the
// sandbox a pipe rather than w's descriptor (process 1's stdio in a session is the
// supervisor's log file).
func pipeWriter(w io.Writer) io.Writer { return struct{ io.Writer }{w} }

// orDiscard is w, or a writer that drops everything for nil.
func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

func (o *Options) defaults() {
	o.Stdin, o.Stdout, o.Stderr = orEmpty(o.Stdin), orDiscard(o.Stdout), orDiscard(o.Stderr)
	if o.RunRoot == "" {
		o.RunRoot = paths.RunRoot().String()
	}
	if o.Init == "" {
		o.Init = DefaultInit()
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.now == nil {
		o.now = time.Now
	}
}

// run is the state of one Run call; its phases are prepare, execute and teardown.
type run struct {
	plan  *contract.Plan
	o     *Options
	start time.Time
	res   Result

	uid    runUID // the sandbox's host uid, and the lease of it
	uidErr error  // why the run has no host uid for its sandbox: prepare refuses it
	rd     *runDir
	// masks are the identities of the entries the run's masks rest on, as they were
	// before the sandbox started (recordMasks): its placeholders and the workspace's
	// own entries the plan masks or binds read-only. Written in prepare only; read
	// as each command ends (maskedGone) and by the live watch (maskBroken).
	masks map[string]linux.FileID
	// masksSaid are the masks found gone and said so: not said again. Guarded by
	// masksMu (a session's commands may end together, beside the live watch).
	masksMu   sync.Mutex
	masksSaid map[string]bool
	wsLock    *wsLock // the run's hold on its workspace tree (lockWorkspace)
	broker    *creds.Broker
	log       *audit.Writer
	eg        *egressService
	sb        sandbox.Sandbox
	sink      *tally.Sink
	monitorState
	// The listener process 1 dials (until it has) and its token; a session's channel
	// to it and directory of spill files; a one-command run's hand-over.
	session     bool
	gates       *gates                   // nil without gates
	wsMu        sync.Mutex               // wsMu guards ws.
	ws          *fsdiff.Tracker          // a session's workspace tracker, forked per command
	sw          sessionSets              // a session's change sets (sessionsets.go); guarded by wsMu
	turnMu      sync.Mutex               // turnMu guards turn, turnBytes and turnMore.
	turn        map[string]bool          // paths changed since the session's last Sweep, bounded (spill.go)
	turnBytes   int                      // turn's paths as JSON strings, in bytes
	turnMore    int                      // changes past turn's bound, not kept
	cgMu        sync.Mutex               // cgMu guards cmdCgroups.
	cmdCgroups  []*sandbox.CommandCgroup // session commands' cgroups still holding processes
	ctlLn       *net.UnixListener
	ctlToken    string
	relayed     atomic.Bool // the backend gave the egress listener to Host.ServeRelayed
	ctl         *control
	handoff     chan error // a one-command run's hello, taken or refused (handOver)
	handoffStop context.CancelFunc
	spillDir    string

	qMu  sync.Mutex // qMu serialises quarantine renames (the live watch's and the sweep's)
	live *liveWatch // nil without a live watch for new git repositories
	// watched is what the live watch reported changed in the workspace during a
	// direct one-command run, for its diff; walkWhy says why the diff walks instead
	// (changeset_linux.go).
	watched *fsdiff.Watched
	walkWhy string

	ended bool // RunEnd is decided (exit code and reason below)
	end   audit.RunEnd

	stage    *stageRecord // a staged run's record; nil for a direct run
	stageDir string
	ss       *stagedSession // a staged session's live overlay and checkpoints; nil otherwise

	// early: a one-command run whose sandbox builds itself while the monitor attaches,
	// the baseline is taken and cmd.start is written (execOne).
	early bool
	// bar, in an early run, holds the command's calls that may change a file until
	// its baseline is read, in place of holding the command (barrier.go); nil when
	// the command waits for the baseline. barPtr is the same, for goroutines that
	// did not start it (the gates'): set once, before the command starts.
	bar    *barrier
	barPtr atomic.Pointer[barrier]

	undo cleanups // what prepare and the session acquired, undone in reverse by teardown
	torn bool     // teardown has run
}

// prepare creates the audit log, the run directory, the placeholders, the credentials,
// the egress proxy and the session's and gates' sockets, then starts the sandbox and its
// monitor (startSandbox). Each step registers its undo in r.undo as soon as it has
// acquired something. Each step is a phase of the trace.
func (r *run) prepare(ctx context.Context) error {
	var ph trace.Seq
	defer ph.End()
	ph.Next("audit.open")
	sync := audit.SyncCommands // a session reports each command once its record is durable
	if !r.session {
		sync = audit.SyncOneCommand
	}
	log, err := openAudit(r.plan, r.o, r.res.RunID, r.uid.host, sync)
	if err != nil {
		return err
	}
	r.o.Log.Debug("audit log open", "dir", log.Dir())
	r.log, r.res.AuditDir = log, log.Dir() // sealed last, by teardown, with run.end
	r.sink = tally.New(log, r.o.Events, r.o.now)
	if r.uidErr != nil {
		return r.uidErr // logged: the run was refused, not run
	}
	ph.Next("rundir")
	if err := checkRunRoot(r.o.RunRoot, r.plan); err != nil {
		return err
	}
	if err := checkKernelFilesystems(r.plan); err != nil {
		return err
	}
	// The workspace is this run's until teardown has removed its placeholders.
	if r.wsLock, err = lockWorkspace(r.o.RunRoot, r.plan.Workspace); err != nil {
		return err
	}
	rd, host, err := makeRunDir(r.o.RunRoot, r.res.RunID, r.plan.Workspace, r.res.AuditDir, r.uid.host)
	if err != nil {
		return errdefs.Unavailablef("%w", err)
	}
	host.UID = r.uid.leased
	r.rd = rd // removed by teardown after the log is sealed (removeRunDir)
	host.Init = r.o.Init
	r.o.Log.Debug("run directory ready", "run", r.res.RunID, "dir", host.RunDir)
	ph.Next("placeholders")
	if err := markGitWritten(r.plan); err != nil {
		return errdefs.Unavailablef("%w", err)
	}
	if err := rd.placeholders(r.plan, nil); err != nil {
		return errdefs.Unavailablef("%w", err)
	}
	r.recordMasks()
	ph.Next("credentials")
	lb, penv, err := r.proxyPort()
	if err != nil {
		return err
	}
	host.Env = append(r.plan.Environ(), penv...)
	intercept, err := r.issueCredentials(ctx, &host)
	if err != nil {
		return err
	}
	ph.Next("egress.start")
	if r.eg, err = startEgress(r.plan, r.sink, r.o.Log, intercept, lb); err != nil {
		return err
	}
	r.undo.add("stopping egress proxy", func(context.Context) error { return r.eg.Close() })
	r.o.Log.Debug("egress proxy ready", "addr", r.eg.addr)
	host.EgressAddr = r.eg.addr
	host.ServeRelayed = r.serveRelayed
	ph.Next("control.listen")
	if err := r.prepareSession(&host); err != nil {
		return err
	}
	ph.Next("gates.start")
	if err := r.startGates(ctx, &host); err != nil {
		return err
	}
	ph.End()
	return r.startSandbox(ctx, host)
}

// startSandbox readies the workspace (a staged run's upper directory, or the watch for
// new repositories), starts the sandbox and, unless the sandbox starts early in a
// one-command run (execOne), attaches the monitor.
func (r *run) startSandbox(ctx context.Context, host sandbox.Host) (err error) {
	var ph trace.Seq
	defer ph.End()
	if r.o.Stage {
		// Nothing lands in the workspace during a staged run: there is no new
		// repository to disarm as it appears; Apply disarms what it lands.
		ph.Next("stage.prepare")
		if err := r.prepareStage(&host); err != nil {
			return err
		}
	} else {
		ph.Next("watch.repositories")
		err := r.watchRepositories()
		r.undo.add("stopping the repository watch", func(context.Context) error { r.stopWatch(); return nil })
		if err != nil {
			return err
		}
		// From here on the watch stops a run whose placeholder is replaced; what
		// replaced one before it started is found now.
		if err := r.placeholdersIntact(); err != nil {
			return err
		}
	}
	ph.Next("sandbox.start")
	if r.sb, err = r.o.Backend.Start(ctx, r.plan, host); err != nil {
		return err
	}
	r.undo.add("tearing down sandbox", r.sb.Close)
	r.undo.add("removing command cgroups", func(context.Context) error { return errors.Join(r.removeCommandCgroups()...) })
	r.o.Log.Debug("sandbox started", "backend", r.o.Backend.Name())
	if !r.session && r.sb.StartsEarly() {
		// A one-command run: the monitor attaches while the sandbox builds itself,
		// before the command is let run (execOne).
		r.early = true
		return nil
	}
	ph.Next("monitor.attach")
	return r.attachMonitor(ctx)
}

// teardown undoes everything prepare and the session acquired, in reverse, on every
// path, and seals the log with run.end. err is why the run is ending early, if it is.
// What could not be cleaned up is returned and recorded in run.end's detail. A second
// call does nothing.
func (r *run) teardown(ctx context.Context, err error) error {
	if r.torn {
		return nil
	}
	r.torn = true
	// Very last: the workspace is let go once its placeholders are gone.
	defer r.wsLock.release()
	defer trace.Begin("teardown").End()
	// Last of all: the kernel's part of closing the live watch (stopWatch) overlaps
	// the rest of teardown; nothing of the run is left open once teardown returns.
	defer r.waitWatchClosed()
	defer r.waitMonitorReleased()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	errs := r.undo.release(cctx)
	for _, e := range errs {
		r.o.Log.Warn("cleanup", "err", e)
	}
	var terr error
	if len(errs) > 0 {
		terr = fmt.Errorf("teardown: %w", errors.Join(errs...))
	}
	if r.log == nil {
		return errors.Join(terr, r.removeRunDir(nil))
	}
	r.sink.Close() // the proxy is closed: the last counts of attempts past the budgets
	if !r.ended {
		r.end = audit.RunEnd{ExitCode: errdefs.ExitCannotRun, Reason: audit.ReasonError}
		if err != nil {
			r.end.Detail = err.Error()
		}
	}
	if terr != nil {
		r.end.Detail = strings.TrimPrefix(r.end.Detail+"; ", "; ") + strings.ReplaceAll(terr.Error(), "\n", "; ")
	}
	// All of the run but its owner record goes while the log is sealed: nothing in the
	// log or its seal depends on it, and the sandbox that could use it is gone.
	released := r.releaseRunDir()
	sp := trace.Begin("audit.seal")
	cerr := r.log.Close(r.end)
	sp.End()
	if cerr != nil {
		r.o.Log.Warn("sealing the audit log", "err", cerr)
	}
	return errors.Join(terr, r.removeRunDir(released))
}

// releaseRunDir starts releasing the run directory (runDir.release: the placeholders,
// what a backend mounted there, all but the owner record) beside the rest of teardown;
// wait returns what release did. With no run directory there is nothing to release.
func (r *run) releaseRunDir() (wait func() (keep bool, err error)) {
	if r.rd == nil {
		return func() (bool, error) { return false, nil }
	}
	rd := r.rd
	type released struct {
		keep bool
		err  error
	}
	done := make(chan released, 1)
	go func() {
		defer trace.Begin("rundir.release").End()
		keep, err := rd.release()
		done <- released{keep, err}
	}()
	return func() (bool, error) {
		r := <-done
		return r.keep, r.err
	}
}

// removeRunDir removes the run directory once released (releaseRunDir, started
// here when nil) has returned, its owner record last of all: the record names the
// placeholders for gc until they are gone, and it is what tells others the run lives
// (runner.Live); a run lives until its log is sealed, so a follower that sees it gone
// knows no line will come after the ones it has read. What cannot be removed is
// logged (the log is sealed by now) and left to gc.
func (r *run) removeRunDir(released func() (bool, error)) error {
	if r.rd == nil {
		return nil
	}
	if released == nil {
		released = r.releaseRunDir()
	}
	rd := r.rd
	r.rd = nil
	defer trace.Begin("rundir.remove").End()
	keep, err := released()
	if !keep {
		err = errors.Join(err, rd.removeDir())
	}
	if err != nil {
		r.o.Log.Warn("cleanup", "err", err)
		return fmt.Errorf("teardown: %w", err)
	}
	return nil
}

// auditErr reports a log that failed during the run: the run fails closed.
func (r *run) auditErr() error {
	if r.log != nil && r.log.Err() != nil {
		return errdefs.Unavailablef("the audit log failed during the run, which was stopped: %w", r.log.Err())
	}
	return nil
}

// finish records how the run ended.
func (r *run) finish(code int, reason, detail string) {
	r.res.ExitCode, r.ended = code, true
	r.res.Duration = r.o.now().Sub(r.start)
	r.end = audit.RunEnd{ExitCode: code, Reason: reason, Detail: detail}
}

// classify maps how Exec ended to an exit status and an audit reason. parent is the
// run's context (cancelled when cordon is signalled); ectx is the command's (with the
// timeout and the audit watch).
func classify(parent, ectx context.Context, code int, err error) (int, string, error) {
	switch {
	case err == nil && !errors.As(context.Cause(ectx), new(*monitorKill)) && !errors.As(context.Cause(ectx), new(*maskKill)):
		// A kill the monitor asked for once the command had exited (a violation read
		// in the drain after it: an open waits up to a poll in the ring buffer) ends
		// it as stopped by the monitor all the same, below; so does a mask found gone
		// by the live watch's last events, read once the command ended.
		return code, audit.ReasonExited, nil
	case errors.Is(context.Cause(ectx), errAuditFailed):
		return errdefs.ExitCannotRun, audit.ReasonAuditFail, nil
	case errors.As(context.Cause(ectx), new(*monitorKill)):
		return errdefs.ExitMonitor, audit.ReasonMonitor, nil
	case errors.As(context.Cause(ectx), new(*maskKill)):
		return errdefs.ExitCannotRun, audit.ReasonError, nil
	case parent.Err() != nil:
		code, reason, _ := signalled(parent)
		return code, reason, nil
	case errors.Is(err, context.DeadlineExceeded) && ectx.Err() != nil:
		return errdefs.ExitTimeout, audit.ReasonTimeout, nil
	case startTimedOut(ectx, err):
		return errdefs.ExitTimeout, audit.ReasonTimeout, nil
	}
	return 0, "", err
}

// startTimedOut reports whether err, from a sandbox still starting, came after the
// command's time ran out: what failed then (a socket the timeout had closed) failed
// because of it. A refused egress listener is the sandbox's doing and stays a refusal.
func startTimedOut(ectx context.Context, err error) bool {
	return errors.Is(context.Cause(ectx), context.DeadlineExceeded) && !errors.Is(err, errListener)
}

// signalled says how ctx's end ends a run: 128+n when cordon got signal n (its cause is a
// [SignalError]), 130 when it was cancelled otherwise; ok is false while ctx is live.
func signalled(ctx context.Context) (code int, reason string, ok bool) {
	if ctx.Err() == nil {
		return 0, "", false
	}
	var sig interface{ Signal() os.Signal }
	if errors.As(context.Cause(ctx), &sig) {
		return 128 + signalNumber(sig.Signal()), audit.ReasonSignal, true
	}
	return 130, audit.ReasonCanceled, true
}
