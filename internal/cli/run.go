package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/runner"
	"github.com/cordonhq/cordon/session"
)

func runCmd(ctx context.Context, stdio IO, args []string) error {
	fs := newFlags("run", "run [-c FILE] [--backend auto|bwrap|docker|containerd] [--timeout D] [--audit-dir DIR] [-v] -- CMD [ARGS...]", stdio.Stderr)
	file := contractFlag(fs)
	backend := fs.String("backend", envOr("CORDON_BACKEND", "auto"), "sandbox `backend`: auto, bwrap, docker, containerd ($CORDON_BACKEND)")
	timeout := fs.Duration("timeout", 0, "per-command timeout, overriding commands.timeout (default from the contract, 60s)")
	auditDir := fs.String("audit-dir", envOr("CORDON_AUDIT_DIR", ""), "audit root `DIR` ($CORDON_AUDIT_DIR); never inside the workspace")
	gates := gatesFlag(fs)
	verbose := fs.Bool("v", false, "print cordon's own diagnostics and the run's events to stderr")
	if err := parse(fs, args); err != nil {
		return err
	}
	argv := fs.Args()
	if len(argv) == 0 {
		fs.Usage()
		return errdefs.Usagef("run: no command given (cordon run -- CMD [ARGS...])")
	}
	if *timeout < 0 {
		return errdefs.Usagef("run: --timeout must be positive")
	}
	root, err := auditRoot(*auditDir)
	if err != nil {
		return reportRunError(stdio, err)
	}
	t0 := time.Now()
	plan, _, err := planOf(*file, root, func(cleaned []string, err error) {
		if *verbose && (err != nil || len(cleaned) > 0) {
			fmt.Fprintf(stdio.Stderr, "cordon: cleaned up after %d crashed run(s)%s\n", len(cleaned), errSuffix(err))
		}
	})
	if err != nil {
		return reportRunError(stdio, err)
	}
	b, err := selectBackend(ctx, *backend, plan)
	if err != nil {
		return reportRunError(stdio, err)
	}
	opts := runner.Options{
		Gates:   *gates,
		Backend: b, Stdin: stdio.Stdin, Stdout: stdio.Stdout, Stderr: stdio.Stderr,
		Timeout: *timeout, AuditRoot: root, Version: Version, Secrets: scrubbedSecrets(plan),
	}
	if *verbose {
		log := slog.New(slog.NewTextHandler(stdio.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
		opts.Log = log
		log.Debug("contract compiled", "took", time.Since(t0))
		opts.Events = event.SinkFunc(func(e event.Event) {
			if e.Type == event.NetAllow || e.Type == event.NetDeny {
				fmt.Fprintf(stdio.Stderr, "cordon: %s %+v\n", e.Type, e.Body)
			}
		})
	}
	ctx, stop := withSignals(ctx)
	defer stop()
	res, err := runner.Run(ctx, plan, argv, opts)
	if *verbose && res.AuditDir != "" {
		fmt.Fprintf(stdio.Stderr, "cordon: run %s logged in %s\n", res.RunID, res.AuditDir)
	}
	runEnding(res).print(stdio.Stderr)
	if err != nil {
		return reportRunError(stdio, err)
	}
	if res.ExitCode != 0 {
		return errdefs.Exit(res.ExitCode)
	}
	return nil
}

// runEnding is the summary a run ends with, in the words of `cordon exec`'s.
func runEnding(res runner.Result) ending {
	return ending{denied: session.WireDenials(res.Denied), alerts: session.WireAlerts(res.Alerts)}
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
