package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/cordonhq/cordon/contract"
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
	// Init is cordon's static binary to run as process 1; "" means this executable.
	Init string
	// Log receives cordon's own diagnostics; nil discards them.
	Log *slog.Logger
	// Events receives the run's events; nil discards them.
	Events event.Sink

	now func() time.Time // or nil for time.Now
}

// Result is how a run ended.
type Result struct {
	RunID    string
	ExitCode int // the command's status, 124 on timeout, 128+n when cordon got signal n
	TimedOut bool
	Duration time.Duration
}

// Unsupported lists the parts of a plan this cordon parses but cannot enforce yet with
// the given backend; running would silently ignore them, so Run refuses.
func Unsupported(p *contract.Plan) []string {
	var out []string
	if len(p.Egress) > 0 {
		out = append(out, "network.allow (egress through the proxy)")
	}
	if len(p.Credentials) > 0 {
		out = append(out, "credentials")
	}
	if p.Monitor.Mode != "off" {
		out = append(out, "monitor.mode "+p.Monitor.Mode)
	}
	return out
}

// Run executes argv in a fresh sandbox built from plan and tears everything down before
// it returns, whatever happens. Errors wrap an errdefs category; a command that ran
// and failed is not an error (see Result.ExitCode).
func Run(ctx context.Context, plan *contract.Plan, argv []string, o Options) (res Result, err error) {
	o.defaults()
	if len(argv) == 0 {
		return res, fmt.Errorf("%w: no command given", errdefs.ErrInvalid)
	}
	if u := Unsupported(plan); len(u) > 0 {
		return res, fmt.Errorf("%w: this contract uses %s, which this cordon cannot enforce yet; remove it or use a newer cordon", errdefs.ErrUnsupported, strings.Join(u, ", "))
	}
	if rule := plan.DeniedBy(argv); rule != nil {
		return res, fmt.Errorf("%w: command denied by contract rule %q (%s)", errdefs.ErrDenied, rule.Pattern, rule.Where)
	}
	if err := o.Backend.Check(ctx); err != nil {
		return res, err
	}
	start := o.now()
	res.RunID = NewRunID(start)
	rd, host, err := makeRunDir(o.RunRoot, res.RunID)
	if err != nil {
		return res, fmt.Errorf("%w: %v", errdefs.ErrUnavailable, err)
	}
	host.Init = o.Init
	o.Log.Debug("run directory ready", "run", res.RunID, "dir", host.RunDir)
	defer func() {
		if rerr := rd.remove(); rerr != nil {
			o.Log.Warn("cleaning up run directory", "err", rerr)
		}
	}()
	if err := rd.placeholders(plan); err != nil {
		return res, fmt.Errorf("%w: %v", errdefs.ErrUnavailable, err)
	}
	sb, err := o.Backend.Start(ctx, plan, host)
	if err != nil {
		return res, err
	}
	o.Log.Debug("sandbox started", "backend", o.Backend.Name())
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if cerr := sb.Close(cctx); cerr != nil {
			err = errors.Join(err, fmt.Errorf("tearing down sandbox: %w", cerr))
		}
	}()

	timeout := time.Duration(plan.Timeout)
	if o.Timeout > 0 {
		timeout = o.Timeout
	}
	ectx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	o.Events.Emit(event.Event{Type: event.CmdStart, Body: map[string]any{"argv": argv}})
	code, err := sb.Exec(ectx, Process{Argv: argv, Dir: plan.Workdir, Stdin: o.Stdin, Stdout: o.Stdout, Stderr: o.Stderr})
	res.Duration = o.now().Sub(start)
	o.Log.Debug("command finished", "code", code, "err", err)
	switch {
	case err == nil:
		res.ExitCode = code
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		res.ExitCode, res.TimedOut, err = errdefs.ExitTimeout, true, nil
		fmt.Fprintf(o.Stderr, "cordon: command timed out after %s and was killed with everything it started (commands.timeout)\n", timeout)
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		res.ExitCode, err = 130, nil
		if cause := context.Cause(ctx); cause != nil && cause != ctx.Err() {
			var sig interface{ Signal() os.Signal }
			if errors.As(cause, &sig) {
				res.ExitCode = 128 + signalNumber(sig.Signal())
			}
		}
	default:
		return res, err
	}
	o.Events.Emit(event.Event{Type: event.CmdEnd, Body: map[string]any{"exit_code": res.ExitCode, "duration_ms": res.Duration.Milliseconds()}})
	return res, nil
}

func (o *Options) defaults() {
	if o.Stdin == nil {
		o.Stdin = strings.NewReader("")
	}
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	if o.RunRoot == "" {
		o.RunRoot = DefaultRunRoot()
	}
	if o.Init == "" {
		o.Init, _ = os.Executable()
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Events == nil {
		o.Events = event.Discard
	}
	if o.now == nil {
		o.now = time.Now
	}
}
