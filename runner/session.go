package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
)

// ExecOptions configure one command of a session. Zero fields mean defaults.
type ExecOptions struct {
	Dir     string        // working directory inside; "" means the plan's workdir
	Timeout time.Duration // overrides the plan's per-command timeout when positive
	Stdin   io.Reader
	Stdout  io.Writer
	Stderr  io.Writer
}

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
	// DeniedEgress lists the "host:port" the egress proxy refused it.
	DeniedEgress []string
}

// Session is one run kept open for several commands: the run directory, audit log,
// egress proxy, credentials, cgroup and monitor are set up once by StartSession and
// torn down by Close; each Exec starts a fresh sandbox (for bwrap, one bwrap process)
// with the same workspace. Files persist through the workspace only.
//
// Exec may be called from several goroutines at once. Locks: mu guards closed and
// counts the running commands (wg) so that Close waits for them; the audit writer,
// the event sink and the monitor's kill switches each have their own lock.
type Session struct {
	r *run

	mu     sync.Mutex // mu guards closed and adding to wg.
	closed bool
	wg     sync.WaitGroup
	n      int // commands started, guarded by mu
}

// StartSession prepares a run for plan (services and sandbox) without running a command.
// Close must be called to tear it down.
func StartSession(ctx context.Context, plan *contract.Plan, o Options) (s *Session, err error) {
	o.defaults()
	if u := Unsupported(plan); len(u) > 0 {
		return nil, fmt.Errorf("%w: this contract uses %s, which this cordon cannot enforce yet; remove it or use a newer cordon", errdefs.ErrUnsupported, strings.Join(u, ", "))
	}
	if err := o.Backend.Check(ctx); err != nil {
		return nil, err
	}
	r := &run{plan: plan, o: &o, start: o.now()}
	r.res.RunID = audit.NewRunID(r.start)
	defer func() {
		if p := recover(); p != nil {
			r.teardown(ctx, fmt.Errorf("panic: %v", p))
			panic(p)
		}
	}()
	if err := r.prepare(ctx); err != nil {
		r.teardown(ctx, err)
		return nil, err
	}
	return &Session{r: r}, nil
}

// ID is the session's run id.
func (s *Session) ID() string { return s.r.res.RunID }

// AuditDir is where the session's log is.
func (s *Session) AuditDir() string { return s.r.res.AuditDir }

// RunDir is the session's private run directory on the host.
func (s *Session) RunDir() string { return s.r.rd.path }

// ErrClosed is returned by Exec after Close.
var ErrClosed = errors.New("session is stopped")

// Exec runs argv in a fresh sandbox of the session. The contract's commands.deny rules
// are checked first: a denied command is refused (ErrDenied) and not logged as a
// command. A command that ran and failed is not an error (see ExecResult.ExitCode).
func (s *Session) Exec(ctx context.Context, argv []string, eo ExecOptions) (ExecResult, error) {
	if len(argv) == 0 {
		return ExecResult{}, fmt.Errorf("%w: no command given", errdefs.ErrInvalid)
	}
	if rule := s.r.plan.DeniedBy(argv); rule != nil {
		return ExecResult{}, fmt.Errorf("%w: command denied by contract rule %q (%s)", errdefs.ErrDenied, rule.Pattern, rule.Where)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ExecResult{}, fmt.Errorf("%w: %w", errdefs.ErrUnavailable, ErrClosed)
	}
	s.wg.Add(1)
	s.n++
	s.mu.Unlock()
	defer s.wg.Done()
	res, err := s.r.execOne(ctx, argv, eo, false)
	if err == nil {
		err = s.r.auditErr()
	}
	return res, err
}

// Close waits for running commands, then revokes credentials, stops the monitor, the
// sandbox and the proxy, removes the run directory and seals the log. ctx ending (a
// signal) is recorded as the reason. It is idempotent.
func (s *Session) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	n := s.n
	s.mu.Unlock()
	s.wg.Wait()
	reason, code := audit.ReasonExited, 0
	if ctx.Err() != nil {
		reason, code = audit.ReasonCanceled, 130
		var se SignalError
		if errors.As(context.Cause(ctx), &se) {
			reason, code = audit.ReasonSignal, 128+signalNumber(se.Sig)
		}
	}
	s.r.finish(code, reason, fmt.Sprintf("session stopped after %d command(s)", n))
	s.r.teardown(ctx, nil)
	return s.r.auditErr()
}
