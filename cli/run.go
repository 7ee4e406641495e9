package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/cli/ending"
	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/gate"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/internal/termtext"
	"github.com/cordonhq/cordon/internal/trace"
	"github.com/cordonhq/cordon/runner"
	"github.com/cordonhq/cordon/runner/supervise"
)

// runOptions are cordon run's flags.
type runOptions struct {
	file, backend, auditDir string
	trace                   string
	timeout                 time.Duration
	gates                   *gate.Mode
	verbose, stage          bool
}

func newRunCmd(stdio IO) *cobra.Command {
	var o runOptions
	c := &cobra.Command{
		Use:   "run [flags] [--] CMD [ARGS...]",
		Short: "run a command in a sandbox built from the contract",
		Long: `Runs CMD in a sandbox built from the contract (-c FILE, else ./cordon.yaml, else the
built-in default contract), logs it in the audit root, and exits with CMD's status.
Flags end at CMD: everything from CMD on is CMD's (cordon run make -v gives -v to make).

Exit status: CMD's own; 124 when the timeout killed it; 125 when cordon could not run it
(invalid contract, no usable backend, audit root not writable); 137 when the monitor
stopped it; 2 for a usage error.`,
		Example: `  cordon run -- make test
  cordon run -c ci.yaml --timeout 10m -- make
  cordon run --backend docker -v -- go build ./...
  cordon run make -v                 # -v is make's: flags end at the command`,
		RunE: func(c *cobra.Command, args []string) error { return runCmd(c.Context(), stdio, o, args) },
	}
	f := c.Flags()
	f.SetInterspersed(false) // as docker run: the command's flags are its own
	contractFlag(f, &o.file)
	backendFlag(f, &o.backend)
	f.DurationVar(&o.timeout, "timeout", 0, "per-command timeout, overriding commands.timeout (default from the contract, 60s)")
	f.StringVar(&o.auditDir, "audit-dir", envOr("CORDON_AUDIT_DIR", ""), "audit root `DIR` ($CORDON_AUDIT_DIR); never inside the workspace")
	o.gates = gatesFlag(f)
	f.BoolVar(&o.stage, "stage", false, "run against a copy-on-write view of the workspace; land the changes later with cordon apply RUN, or drop them with cordon discard RUN")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "print cordon's own diagnostics and the run's events to stderr")
	traceFlag(f, &o.trace)
	return c
}

func runCmd(ctx context.Context, stdio IO, o runOptions, argv []string) error {
	if len(argv) == 0 {
		return errdefs.Usagef("run: no command given (cordon run -- CMD [ARGS...])")
	}
	if o.timeout < 0 {
		return errdefs.Usagef("run: --timeout must be positive")
	}
	if err := openTrace(o.trace); err != nil {
		return reportRunError(stdio, err)
	}
	root, err := auditRoot(o.auditDir)
	if err != nil {
		return reportRunError(stdio, err)
	}
	runner.PrefetchHostUID() // overlaps the contract's load
	t0 := time.Now()
	span := trace.Begin("cli.contract")
	plan, _, err := planOf(o.file, root, func(cleaned []string, err error) {
		if o.verbose && (err != nil || len(cleaned) > 0) {
			fmt.Fprintf(stdio.Stderr, "cordon: cleaned up after %d crashed run(s)%s\n", len(cleaned), errSuffix(err))
		}
	})
	span.End()
	if err != nil {
		return reportRunError(stdio, err)
	}
	span = trace.Begin("cli.backend")
	b, err := selectBackend(ctx, o.backend, plan)
	span.End()
	if err != nil {
		return reportRunError(stdio, err)
	}
	opts := runner.Options{
		Gates:   *o.gates,
		Backend: b, Stdin: stdio.Stdin, Stdout: stdio.Stdout, Stderr: stdio.Stderr,
		Timeout: o.timeout, AuditRoot: root, Version: Version, Secrets: scrubbedSecrets(plan),
		Stage: o.stage,
	}
	if o.verbose {
		log := slog.New(slog.NewTextHandler(stdio.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
		opts.Log = log
		log.Debug("contract compiled", "took", time.Since(t0))
		opts.Events = event.SinkFunc(func(e event.Event) {
			if line, ok := verboseNet(e); ok {
				fmt.Fprintf(stdio.Stderr, "cordon: %s\n", line)
			}
		})
	}
	ctx, stop := withSignals(ctx)
	defer stop()
	span = trace.Begin("runner.run")
	res, err := runner.Run(ctx, plan, argv, opts)
	span.End()
	if o.verbose && res.AuditDir != "" {
		fmt.Fprintf(stdio.Stderr, "cordon: run %s logged in %s\n", res.RunID, res.AuditDir)
	}
	runEnding(res).Print(stdio.Stderr)
	if o.stage && err == nil && res.Staged == 0 {
		fmt.Fprintf(stdio.Stderr, "cordon: staged run %s: no changes; nothing is staged\n", res.RunID)
	} else if o.stage && err == nil {
		fmt.Fprintf(stdio.Stderr, "cordon: staged run %s: %d change(s) wait (%d files changed, +%d -%d); land them with `cordon apply %s`, drop them with `cordon discard %s`\n",
			res.RunID, res.Staged, res.FilesChanged, res.Insertions, res.Deletions, res.RunID, res.RunID)
	}
	if err != nil {
		return reportRunError(stdio, err)
	}
	if res.ExitCode != 0 {
		return errdefs.Exit(res.ExitCode)
	}
	return nil
}

// runEnding is the summary a run ends with, in the words of `cordon exec`'s.
func runEnding(res runner.Result) ending.Summary {
	return ending.Summary{Denied: supervise.WireDenials(res.Denied), More: res.DeniedMore, Alerts: supervise.WireAlerts(res.Alerts)}
}

// reportRunError prints err as cordon's one-line reason (one line per contract
// problem) and returns its exit status: 125 unless err carries another.
func reportRunError(stdio IO, err error) error {
	err = errdefs.CannotRun(err)
	for _, line := range strings.Split(errdefs.Message(err), "\n") {
		fmt.Fprintf(stdio.Stderr, "cordon: %s\n", line)
	}
	return errdefs.Reported(err)
}

// withSignals cancels ctx, with the signal as the cause, on SIGINT, SIGTERM or SIGHUP,
// so that the run tears everything down before cordon exits.
func withSignals(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			cancel(runner.SignalError{Sig: s})
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel(nil)
	}
}

// auditRoot is --audit-dir made absolute, or the default root.
func auditRoot(flagValue string) (string, error) {
	if flagValue == "" {
		root, err := audit.DefaultRoot()
		if err != nil {
			return "", errdefs.Unavailablef("no audit root (%w); pass --audit-dir", err)
		}
		return root, nil
	}
	return filepath.Abs(flagValue)
}

// scrubbedSecrets lists the caller's variables that the sandbox does not get and that
// look like credentials, so the audit log redacts their values wherever they appear.
func scrubbedSecrets(plan *contract.Plan) []string {
	var out []string
	for _, kv := range os.Environ() {
		name, value, _ := strings.Cut(kv, "=")
		if _, passed := plan.EnvValue(name); !passed && contract.LooksLikeCredential(name, value) {
			out = append(out, kv)
		}
	}
	return out
}

func errSuffix(err error) string {
	if err == nil {
		return ""
	}
	return " (" + err.Error() + ")"
}

// verboseNet is how `cordon run -v` shows an egress event as it happens, escaped (the
// hosts come from the sandbox): its type and body, a summary's body as its JSON (which
// names its destinations and their counts). ok is false for other events.
func verboseNet(e event.Event) (line string, ok bool) {
	switch e.Type {
	case event.NetAllow, event.NetDeny, event.NetDenySummary:
		return termtext.Line(fmt.Sprintf("%s %+v", e.Type, e.Body)), true
	case event.NetAllowSummary:
		b, err := json.Marshal(e.Body)
		if err != nil {
			return termtext.Line(fmt.Sprintf("%s %+v", e.Type, e.Body)), true
		}
		return termtext.Line(string(e.Type) + " " + string(b)), true
	}
	return "", false
}
