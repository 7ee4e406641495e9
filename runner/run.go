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
	"time"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/audit/fsdiff"
	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/creds"
	"github.com/cordonhq/cordon/gate"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/event"
)

// Options configure one run. Zero fields mean defaults.
type Options struct {
	Backend Backend // required
	Stdin   io.Reader
	Stdout  io.Writer
	Stderr  io.Writer
	// Timeout overrides the plan's per-command timeout when positive.
	Timeout time.Duration
	// RunRoot holds run directories; "" means DefaultRunRoot().
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

	now func() time.Time // or nil for time.Now
}

// Result is how a run ended.
type Result struct {
	RunID    string
	ExitCode int // the command's status, 124 on timeout, 128+n when cordon got signal n
	TimedOut bool
	Duration time.Duration
	AuditDir string // where the run's log is
}

// Run executes argv in a fresh sandbox built from plan, records it in the audit log,
// and tears everything down before it returns, whatever happens. Errors wrap an errdefs
// category; a command that ran and failed is not an error (see Result.ExitCode).
func Run(ctx context.Context, plan *contract.Plan, argv []string, o Options) (Result, error) {
	o.defaults()
	if len(argv) == 0 {
		return Result{}, errdefs.Invalidf("no command given")
	}
	if rule := plan.DeniedBy(argv); rule != nil {
		return Result{}, errdefs.Deniedf("command denied by contract rule %q (%s)", rule.Pattern, rule.Where)
	}
	if err := o.Backend.Check(ctx); err != nil {
		return Result{}, err
	}
	r := &run{plan: plan, o: &o, start: o.now()}
	r.res.RunID = audit.NewRunID(r.start)
	var err error
	defer func() {
		// Teardown runs on every path, a panic included: credentials are revoked and
		// nothing is left running before the panic goes on.
		if p := recover(); p != nil {
			r.teardown(ctx, fmt.Errorf("panic: %v", p))
			panic(p)
		}
	}()
	err = r.prepare(ctx)
	if err == nil {
		err = r.execute(ctx, argv)
	}
	if terr := r.teardown(ctx, err); terr != nil {
		// The command's status stands; what is left is said here and in run.end, and
		// cordon gc removes it.
		fmt.Fprintf(o.Stderr, "cordon: warning: %v\n", terr)
	}
	if err != nil {
		return r.res, err
	}
	return r.res, r.auditErr()
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
		o.RunRoot = DefaultRunRoot()
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

	rd     *runDir
	broker *creds.Broker
	log    *audit.Writer
	eg     *egressService
	sb     Sandbox
	sink   *cmdSink
	monitorState
	// A session's: the listener process 1 dials (until it has), the channel to it, and
	// the directory of spill files.
	session    bool
	gates      *gates           // nil without gates
	wsMu       sync.Mutex       // wsMu guards ws.
	ws         *fsdiff.Tracker  // a session's workspace tracker, forked per command
	turnMu     sync.Mutex       // turnMu guards turn.
	turn       map[string]bool  // paths changed since the session's last Sweep
	cgMu       sync.Mutex       // cgMu guards cmdCgroups.
	cmdCgroups []*CommandCgroup // session commands' cgroups still holding processes
	ctlLn      *net.UnixListener
	ctl        *control
	spillDir   string

	qMu  sync.Mutex // qMu serialises quarantine renames (the live watch's and the sweep's)
	live *liveWatch // nil without a live watch for new git repositories

	ended bool // RunEnd is decided (exit code and reason below)
	end   audit.RunEnd
}

// prepare creates the run directory, the audit log, the placeholders and the egress
// proxy, then starts the sandbox.
func (r *run) prepare(ctx context.Context) error {
	log, err := openAudit(r.plan, r.o, r.res.RunID)
	if err != nil {
		return err
	}
	r.o.Log.Debug("audit log open", "dir", log.Dir())
	r.log, r.res.AuditDir = log, log.Dir()
	r.sink = &cmdSink{next: log, copy: r.o.Events}
	rd, host, err := makeRunDir(r.o.RunRoot, r.res.RunID, r.plan.Workspace)
	if err != nil {
		return errdefs.Unavailablef("%w", err)
	}
	r.rd = rd
	host.Init = r.o.Init
	r.o.Log.Debug("run directory ready", "run", r.res.RunID, "dir", host.RunDir)
	if err := rd.placeholders(r.plan); err != nil {
		return errdefs.Unavailablef("%w", err)
	}
	host.Env = append(r.plan.Environ(), ProxyEnv()...)
	intercept, err := r.issueCredentials(ctx, &host)
	if err != nil {
		return err
	}
	if r.eg, err = startEgress(ctx, r.plan, host.RunDir, r.sink, r.o.Log, intercept); err != nil {
		return err
	}
	r.o.Log.Debug("egress proxy listening", "socket", r.eg.socket)
	host.EgressSocket = r.eg.socket
	if err := r.prepareSession(&host); err != nil {
		return err
	}
	if err := r.startGates(ctx, &host); err != nil {
		return err
	}
	r.watchRepositories()
	if r.sb, err = r.o.Backend.Start(ctx, r.plan, host); err != nil {
		return err
	}
	r.o.Log.Debug("sandbox started", "backend", r.o.Backend.Name())
	return r.startMonitor(ctx)
}

// teardown stops everything in reverse order, on every path, and seals the log. What
// could not be cleaned up is returned, and recorded in run.end's detail.
func (r *run) teardown(ctx context.Context, err error) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var errs []error
	if r.gates != nil {
		r.gates.close() // refuses pending requests; operations running finish and revoke
	}
	if err := r.revokeCredentials(ctx); err != nil {
		errs = append(errs, fmt.Errorf("revoking credentials: %w", err))
		fmt.Fprintf(r.o.Stderr, "cordon: ALERT: %v\n", err)
	}
	if err := r.stopMonitor(); err != nil {
		errs = append(errs, fmt.Errorf("stopping the monitor: %w", err))
	}
	if r.ctlLn != nil {
		r.ctlLn.Close()
	}
	if r.ctl != nil {
		r.ctl.close()
	}
	errs = append(errs, r.removeCommandCgroups()...)
	if r.sb != nil {
		if cerr := r.sb.Close(cctx); cerr != nil {
			errs = append(errs, fmt.Errorf("tearing down sandbox: %w", cerr))
		}
	}
	r.stopWatch()
	if r.eg != nil {
		if cerr := r.eg.Close(); cerr != nil {
			errs = append(errs, fmt.Errorf("stopping egress proxy: %w", cerr))
		}
	}
	if r.rd != nil {
		if cerr := r.rd.remove(); cerr != nil {
			errs = append(errs, cerr)
		}
	}
	for _, e := range errs {
		r.o.Log.Warn("cleanup", "err", e)
	}
	var terr error
	if len(errs) > 0 {
		terr = fmt.Errorf("teardown: %w", errors.Join(errs...))
	}
	if r.log == nil {
		return terr
	}
	if !r.ended {
		r.end = audit.RunEnd{ExitCode: errdefs.ExitCannotRun, Reason: audit.ReasonError}
		if err != nil {
			r.end.Detail = err.Error()
		}
	}
	if terr != nil {
		r.end.Detail = strings.TrimPrefix(r.end.Detail+"; ", "; ") + strings.ReplaceAll(terr.Error(), "\n", "; ")
	}
	if cerr := r.log.Close(r.end); cerr != nil {
		r.o.Log.Warn("sealing the audit log", "err", cerr)
	}
	return terr
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
	case err == nil:
		return code, audit.ReasonExited, nil
	case errors.Is(context.Cause(ectx), errAuditFailed):
		return errdefs.ExitCannotRun, audit.ReasonAuditFail, nil
	case errors.As(context.Cause(ectx), new(*monitorKill)):
		return errdefs.ExitMonitor, audit.ReasonMonitor, nil
	case parent.Err() != nil:
		var sig interface{ Signal() os.Signal }
		if errors.As(context.Cause(parent), &sig) {
			return 128 + signalNumber(sig.Signal()), audit.ReasonSignal, nil
		}
		return 130, audit.ReasonCanceled, nil
	case errors.Is(err, context.DeadlineExceeded) && ectx.Err() != nil:
		return errdefs.ExitTimeout, audit.ReasonTimeout, nil
	}
	return 0, "", err
}
