package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/contract"
	gatewire "github.com/cordonhq/cordon/gate/wire"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/runner/sandbox"
	"github.com/cordonhq/cordon/runner/tally"
)

// ExecOptions configure one command of a session. Zero fields mean defaults.
type ExecOptions struct {
	Dir     string        // working directory inside; "" means the plan's workdir
	Timeout time.Duration // overrides the plan's per-command timeout when positive
	Stdin   io.Reader
	Stdout  io.Writer
	Stderr  io.Writer
	// Cap, when positive, keeps at most Cap characters of each of stdout and stderr
	// (see package outcap); the whole output goes to a spill file of the session,
	// readable inside at SpillPath, and the cut output ends with a line naming it.
	Cap int
}

// Denial is one destination the egress proxy refused a command, as the command may be
// told (see [tally.Denial]).
type Denial = tally.Denial

// Alert is one kind of monitor alert a command raised, counted (see [tally.Alert]).
type Alert = tally.Alert

// ExecResult is how one command of a session ended.
type ExecResult struct {
	CmdID    string // the seq of its cmd.start in the log
	ExitCode int    // its status, 124 on timeout, 137 when the monitor stopped it
	Reason   string // an audit.Reason* value
	Detail   string
	TimedOut bool
	Duration time.Duration
	// FilesChanged, Insertions and Deletions summarise its fs.diff.
	FilesChanged, Insertions, Deletions int
	// DeniedEgress lists the "host:port" the egress proxy refused it, once per attempt,
	// for its first 1000 refusals (the log accounts for every one).
	DeniedEgress []string
	// Denied explains those refusals (the first 1000), once per destination.
	Denied []Denial
	// DeniedMore counts its refusals past those 1000, which DeniedEgress does not list
	// (the log itemizes them, or counts them in net.deny.summary lines).
	DeniedMore int
	// Alerts lists the monitor alerts read by the time the command ended, once per
	// category, target and syscall (an alert the monitor reads later is only in the log).
	Alerts []Alert
	// Gates are the host gate service's account of the gate requests it attributed to
	// the command (by its cgroup where it has one of its own, else as the command
	// running), the first 4, in the order they ended; GatesMore counts the rest.
	Gates     []gatewire.Decided
	GatesMore int
	// Output describes stdout ([0]) and stderr ([1]) when ExecOptions.Cap was set.
	Output [2]Capped

	ownCgroup bool // it ran in a cgroup of its own (a session's command)
}

// Bounds on a session's start and stop.
const (
	// startTimeout bounds how long a session's sandbox may take to come up (an
	// engine creating a container included).
	startTimeout = 60 * time.Second
	// stopGrace bounds how long Close waits for running commands to end and then
	// for process 1 to end once hung up on. Process 1 ends at once when it can; one
	// that does not is stopped (SIGSTOP, a tracer) or hung, and the sandbox is killed
	// from outside.
	stopGrace = 2 * time.Second
	// endGrace bounds how long the sandbox may take to report its end once process 1
	// has ended (an engine's exit processing); the sandbox's Close kills it regardless.
	endGrace = 3 * time.Second
)

// Session is one run: kept open for many commands in one sandbox (StartSession), or
// for exactly one that process 1 runs itself (Run), with the same start, Exec and close.
// The run directory, audit log, egress proxy, credentials, cgroup, monitor and the
// sandbox itself are set up once at the start and torn down, in reverse, by Close. In a
// session, process 1 of the sandbox takes each Exec over the control channel, so files
// anywhere writable (the workspace, /tmp, $HOME) and background processes persist from
// one command to the next, on every backend alike.
//
// Exec may be called from several goroutines at once. Locks: mu guards closed and
// counts the running commands (wg) so that Close waits for them; the audit writer, the
// event sink, the control channel and the monitor's kill switches have their own.
type Session struct {
	r *run

	serveDone chan struct{} // closed when the sandbox's process 1 has ended
	serveErr  error         // how it ended, once serveDone is closed

	mu     sync.Mutex // mu guards closed and adding to wg.
	closed bool
	wg     sync.WaitGroup
	n      int // commands started, guarded by mu
}

// prepareSession gives a session's sandbox its control socket and spill directory.
func (r *run) prepareSession(host *sandbox.Host) error {
	if err := r.prepareControl(host); err != nil || !r.session {
		return err
	}
	r.spillDir = filepath.Join(host.RunDir, "spill")
	if err := os.Mkdir(r.spillDir, 0o755); err != nil {
		return errdefs.Unavailablef("spill directory: %w", err)
	}
	if err := os.Chmod(r.spillDir, 0o755); err != nil { // whatever the umask
		return errdefs.Unavailablef("spill directory: %w", err)
	}
	host.SpillDir = r.spillDir
	return nil
}

// StartSession prepares a run for plan (services and sandbox), starts the sandbox's
// process 1 and waits until it takes commands. Close must be called to tear it down.
func StartSession(ctx context.Context, plan *contract.Plan, o Options) (*Session, error) {
	s, err := start(ctx, plan, o, true)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// serve starts process 1 in serve mode and waits for its control channel.
func (s *Session) serve(ctx context.Context) error {
	r := s.r
	// The sandbox lives until Close, whatever ctx (a CLI's start request) does.
	sctx := context.WithoutCancel(ctx)
	go func() {
		defer close(s.serveDone)
		code, err := r.sb.Exec(sctx, sandbox.Process{Serve: true, Stdout: pipeWriter(r.o.Stderr), Stderr: pipeWriter(r.o.Stderr)})
		if err == nil && code != 0 {
			err = fmt.Errorf("%w: the session's process 1 exited with status %d", errdefs.ErrSandbox, code)
		}
		s.serveErr = err
	}()
	actx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	c, err := acceptControl(actx, r.ctlLn, r.ctlToken, s.serveDone, r.takeHello)
	if err != nil {
		if errors.Is(err, errdefs.ErrSandbox) && !errors.Is(err, errListener) {
			<-s.serveDone
			if s.serveErr != nil {
				err = s.serveErr // why: the self-check, bwrap, the engine
			}
		}
		return err
	}
	r.ctl = c
	r.undo.add("closing the control channel", func(context.Context) error { c.close(); return nil })
	r.o.Log.Debug("session sandbox taking commands")
	return nil
}

// ID is the session's run id.
func (s *Session) ID() string { return s.r.res.RunID }

// Timeout is the contract's per-command timeout (commands.timeout): what a command
// runs for when its Exec asks for none.
func (s *Session) Timeout() time.Duration { return time.Duration(s.r.plan.Timeout) }

// AuditDir is where the session's log is.
func (s *Session) AuditDir() string { return s.r.res.AuditDir }

// Done is closed when the session's sandbox has ended on its own (it was killed, or
// its process 1 died): every later Exec fails, and the session should be closed.
func (s *Session) Done() <-chan struct{} { return s.serveDone }

// ErrClosed is returned by Exec after Close.
var ErrClosed = errors.New("session is stopped")

// Exec runs argv in the session's sandbox. The contract's commands.deny rules are
// checked first: a denied command is refused (ErrDenied) and not logged as a command.
// A command that ran and failed is not an error (see ExecResult.ExitCode).
func (s *Session) Exec(ctx context.Context, argv []string, eo ExecOptions) (ExecResult, error) {
	if err := checkCommand(s.r.plan, argv); err != nil {
		return ExecResult{}, err
	}
	s.mu.Lock()
	if s.closed || !s.r.session && s.n > 0 {
		s.mu.Unlock()
		return ExecResult{}, errdefs.Unavailablef("%w", ErrClosed)
	}
	s.wg.Add(1)
	s.n++
	s.mu.Unlock()
	defer s.wg.Done()
	select {
	case <-s.serveDone:
		return ExecResult{}, errdefs.Unavailablef("the session's sandbox has ended (%v); stop the session", s.serveErr) // serveErr may be nil
	default:
	}
	res, err := s.r.execOne(ctx, argv, eo)
	if err == nil {
		err = s.r.auditErr()
	}
	return res, err
}

// Close ends the session: it waits (a bounded time) for running commands, which should
// have been cancelled, hangs up on process 1 (which kills everything in the sandbox,
// commands still running included), then revokes credentials, stops the monitor, the
// sandbox and the proxy, removes the run directory and seals the log. ctx ending (a
// signal) is recorded as the reason. Every wait is bounded: a process 1 that does not
// end when hung up on (stopped, traced, hung) has its sandbox killed, and Close then
// says so, as does the log's run.end; so does a teardown that failed. It is
// idempotent.
func (s *Session) Close(ctx context.Context) error { return s.close(ctx, nil) }

// close ends the run: a session's process 1 is stopped first (stop), then everything is
// torn down and the log sealed. err, for a one-command run, is why its command could not
// run; the command's own end was recorded by finish.
func (s *Session) close(ctx context.Context, err error) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	n := s.n
	s.mu.Unlock()
	if !s.r.session {
		return s.r.teardown(ctx, err)
	}
	stopErr := s.stop(ctx, n)
	terr := s.r.teardown(ctx, nil)
	return errdefs.Join(stopErr, terr, s.r.auditErr())
}

// stop ends a session's commands and process 1, records what changed since the last
// command, and decides how the session ended; n commands were started.
func (s *Session) stop(ctx context.Context, n int) error {
	waitBounded(&s.wg, stopGrace) // commands an unresponsive process 1 holds end at the hang-up
	reason, code, detail := audit.ReasonExited, 0, fmt.Sprintf("session stopped after %d command(s)", n)
	endedAlone := false
	select {
	case <-s.serveDone:
		endedAlone = true
		reason, code, detail = audit.ReasonError, errdefs.ExitCannotRun, s.endedAlone(n)
	default:
	}
	var stopErr, syncErr error
	if endedAlone {
		stopErr = errdefs.Unavailablef("%s", detail)
	} else {
		// What the commands changed where the host does not see it (a Pod's
		// workspace), brought back while the sandbox still runs: what changes after
		// this goes with the sandbox, never reaching the host.
		syncErr = s.r.sb.SyncWorkspace(ctx, true)
	}
	if !s.r.ctl.hangup(stopGrace) && !endedAlone {
		reason, code = audit.ReasonError, errdefs.ExitCannotRun
		detail = fmt.Sprintf("the session's process 1 did not end within %s of the stop, after %d command(s) (stopped, traced or hung); its sandbox was killed", stopGrace, n)
		stopErr = errdefs.Unavailablef("%s", detail)
	} else {
		select {
		case <-s.serveDone:
			if s.serveErr != nil && !endedAlone {
				// Process 1 ends with status 0 when hung up on: this one had ended
				// otherwise (killed) before the stop reached it.
				reason, code, detail = audit.ReasonError, errdefs.ExitCannotRun, s.endedAlone(n)
				stopErr = errdefs.Unavailablef("%s", detail)
			}
		case <-time.After(endGrace): // the sandbox's Close kills it regardless
		}
	}
	if syncErr != nil {
		// The log says the session's end is not whole rather than a clean stop.
		reason, code = audit.ReasonError, errdefs.ExitCannotRun
		detail += fmt.Sprintf("; what its commands changed since the last command's end was not brought back: %v", syncErr)
		stopErr = errdefs.Join(stopErr, syncErr)
	}
	s.wg.Wait() // quick now: the channel is gone
	// What happened since the last command, once nothing in the sandbox runs any more: a
	// process of the sandbox's own writing meanwhile was missed.
	s.r.closeBetween(ctx)
	if err := s.r.endStagedSession(); err != nil {
		// The stage is left unfinished: teardown (or gc) drops it, never applies it.
		fmt.Fprintf(s.r.o.Stderr, "cordon: staged session: %v\n", err)
		stopErr = errdefs.Join(stopErr, err)
	}
	if c, why, ok := signalled(ctx); ok {
		code, reason = c, why
	}
	s.r.finish(code, reason, detail)
	s.r.end.Staged = s.r.stage.waits()
	return stopErr
}

// endedAlone is run.end's detail for a session whose sandbox ended before the stop
// reached it, after n commands (once serveDone is closed).
func (s *Session) endedAlone(n int) string {
	return fmt.Sprintf("the session's sandbox ended on its own after %d command(s): %v", n, s.serveErr)
}

// waitBounded waits for wg, at most d.
func waitBounded(wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}
