package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cordonhq/cordon/gate"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/runner"
	"github.com/cordonhq/cordon/runner/supervise"
)

func newSuperviseCmd(stdio IO) *cobra.Command {
	var o superviseOptions
	c := &cobra.Command{
		Use:   "supervise --ready-fd N --log FILE [flags]",
		Short: "keep one session open (cordon session start runs it)",
		Args:  noArgs,
		RunE:  func(c *cobra.Command, args []string) error { return superviseCmd(c.Context(), stdio, o) },
	}
	f := c.Flags()
	contractFlag(f, &o.file)
	f.StringVar(&o.backend, "backend", "auto", "sandbox `backend`")
	f.StringVar(&o.auditDir, "audit-dir", "", "audit root `DIR`")
	o.gates = gatesFlag(f)
	f.IntVar(&o.readyFD, "ready-fd", -1, "report readiness on this `fd`")
	f.BoolVar(&o.stage, "stage", false, "stage the workspace")
	f.StringVar(&o.logPath, "log", "", "this process's log `FILE`, renamed to ID.log")
	f.IntVar(&o.holdFD, "hold-fd", -1, "stop the session when this pipe `fd` reads end-of-file (its holder is gone)")
	return c
}

// superviseOptions are cordon internal supervise's flags.
type superviseOptions struct {
	file, backend, auditDir, logPath string
	gates                            *gate.Mode
	readyFD, holdFD                  int
	stage                            bool
}

// superviseCmd is `cordon internal supervise`: it keeps one session (one run) open and
// serves its socket until stopped, a SIGTERM/SIGINT (both tear down like stop), the
// end of its --hold-fd pipe (cordon mcp gone; torn down the same way), its
// sandbox's end, or death (kill -9: process 1 loses its control channel and kills
// everything in the sandbox; cordon gc removes the rest).
func superviseCmd(ctx context.Context, stdio IO, o superviseOptions) error {
	ready := os.NewFile(uintptr(o.readyFD), "ready")
	fail := func(err error) error {
		if ready != nil {
			fmt.Fprintf(ready, "error %s\n", strings.ReplaceAll(errdefs.Message(err), "\n", "; "))
			ready.Close()
		}
		if o.logPath != "" {
			os.Remove(o.logPath)
		}
		return errdefs.CannotRun(err)
	}
	linux.Umask(0o077)
	ctx, stopSignals := withSignals(ctx)
	defer stopSignals()
	root, err := auditRoot(o.auditDir)
	if err != nil {
		return fail(err)
	}
	runner.PrefetchHostUID() // overlaps the contract's load
	plan, _, err := planOf(o.file, root, nil)
	if err != nil {
		return fail(err)
	}
	b, err := selectBackend(ctx, o.backend, plan)
	if err != nil {
		return fail(err)
	}
	// Watched once the backend is chosen: choosing one may replace this process with
	// cordon-engines (execEngines), which must inherit the pipe open.
	if o.holdFD >= 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		linux.CloseOnExec(o.holdFD) // the sandbox and the services must not hold it
		go holdOn(os.NewFile(uintptr(o.holdFD), "hold"), cancel)
	}
	log := slog.New(slog.NewTextHandler(stdio.Stderr, nil))
	sess, err := runner.StartSession(ctx, plan, runner.Options{
		Gates:   *o.gates,
		Backend: b, AuditRoot: root, Version: Version, Secrets: scrubbedSecrets(plan), Log: log,
		Stderr: stdio.Stderr, Stage: o.stage,
	})
	if err != nil {
		return fail(err)
	}
	rt := paths.RunRoot()
	srv, err := supervise.Publish(sess, supervise.Record{Contract: plan.ContractFile, Backend: b.Name(), Workspace: plan.Workspace}, rt)
	if err != nil {
		_ = sess.Close(ctx)
		return fail(errdefs.Unavailablef("session socket: %w", err))
	}
	if o.logPath != "" {
		_ = os.Rename(o.logPath, rt.SessionLog(sess.ID()))
	}
	fmt.Fprintf(ready, "ok %s\n", sess.ID())
	ready.Close()
	log.Info("session ready", "id", sess.ID(), "socket", rt.SessionSocket(sess.ID()))
	err = srv.Serve(ctx)
	log.Info("session stopped", "id", sess.ID(), "err", err)
	return errdefs.CannotRun(err)
}

// holdOn calls stop when hold reads end-of-file (or fails): the process that holds its
// other end (cordon mcp) is gone, and the session stops as a SIGTERM would stop it.
func holdOn(hold *os.File, stop func()) {
	defer hold.Close()
	defer stop()
	_, _ = io.Copy(io.Discard, hold)
}
