package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/runner"
	"github.com/cordonhq/cordon/session"
)

// superviseCmd is `cordon internal supervise`: it keeps one session (one run) open and
// serves its socket until stopped, a SIGTERM/SIGINT (both tear down like stop), its
// sandbox's end, or death (kill -9: process 1 loses its control channel and kills
// everything in the sandbox; cordon gc removes the rest).
func superviseCmd(ctx context.Context, stdio IO, args []string) error {
	fs := newFlags("internal supervise", "internal supervise --ready-fd N --log FILE [-c FILE] [--backend B] [--audit-dir DIR]", stdio.Stderr)
	file := contractFlag(fs)
	backend := fs.String("backend", "auto", "sandbox `backend`")
	auditDir := fs.String("audit-dir", "", "audit root `DIR`")
	gates := gatesFlag(fs)
	readyFD := fs.Int("ready-fd", -1, "report readiness on this `fd`")
	logPath := fs.String("log", "", "this process's log `FILE`, renamed to ID.log")
	if err := parse(fs, args); err != nil {
		return err
	}
	ready := os.NewFile(uintptr(*readyFD), "ready")
	fail := func(err error) error {
		if ready != nil {
			fmt.Fprintf(ready, "error %s\n", strings.ReplaceAll(errdefs.Message(err), "\n", "; "))
			ready.Close()
		}
		if *logPath != "" {
			os.Remove(*logPath)
		}
		return errdefs.CannotRun(err)
	}
	linux.Umask(0o077)
	ctx, stopSignals := withSignals(ctx)
	defer stopSignals()
	root, err := auditRoot(*auditDir)
	if err != nil {
		return fail(err)
	}
	plan, _, err := planOf(*file, root, nil)
	if err != nil {
		return fail(err)
	}
	b, err := selectBackend(ctx, *backend, plan)
	if err != nil {
		return fail(err)
	}
	log := slog.New(slog.NewTextHandler(stdio.Stderr, nil))
	sess, err := runner.StartSession(ctx, plan, runner.Options{
		Gates:   *gates,
		Backend: b, AuditRoot: root, Version: Version, Secrets: scrubbedSecrets(plan), Log: log,
		Stderr: stdio.Stderr,
	})
	if err != nil {
		return fail(err)
	}
	rt := paths.RunRoot()
	srv, err := session.Publish(sess, session.Record{Contract: plan.ContractFile, Backend: b.Name(), Workspace: plan.Workspace}, rt)
	if err != nil {
		_ = sess.Close(ctx)
		return fail(errdefs.Unavailablef("session socket: %w", err))
	}
	if *logPath != "" {
		_ = os.Rename(*logPath, rt.SessionLog(sess.ID()))
	}
	fmt.Fprintf(ready, "ok %s\n", sess.ID())
	ready.Close()
	log.Info("session ready", "id", sess.ID(), "socket", rt.SessionSocket(sess.ID()))
	err = srv.Serve(ctx)
	log.Info("session stopped", "id", sess.ID(), "err", err)
	return errdefs.CannotRun(err)
}
