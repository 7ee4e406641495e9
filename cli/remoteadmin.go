package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/runner"
	"github.com/cordonhq/cordon/server/api"
	"github.com/cordonhq/cordon/session/remote"
)

// The gate, audit, apply and discard commands with --host: the same requests of the
// tenant's gates and runs on the server, printed by the same code as here. A RUN is a
// run id of the tenant, or last: its newest run (of any of its workspaces).

// remoteOf is a client of the server c's --host names, or nil when it names none. The
// flags of c named in local (directories of this host, or what the server does not
// do) are refused with a host.
func remoteOf(c *cobra.Command, local ...string) (*remote.Client, error) {
	r := hostOf(c)
	if r.Host == "" {
		return nil, nil
	}
	for _, name := range local {
		if c.Flags().Changed(name) {
			return nil, errdefs.Usagef("%s: --%s is this host's; not with --host", c.CommandPath(), name)
		}
	}
	return dial(r)
}

// orRemote is err (dialling failed, or a flag was refused), else what the remote
// command run returns.
func orRemote(err error, run func() error) error {
	if err != nil {
		return err
	}
	return run()
}

// runSelFlags are the flags of runSel, which pick a run of this host.
var runSelFlags = []string{"audit-dir", "all", "contract"}

// remoteRunID is the run the single RUN|last argument names on the server.
func remoteRunID(ctx context.Context, cl *remote.Client, name string, pos []string) (string, error) {
	if len(pos) != 1 {
		return "", errdefs.Usagef("%s: want one RUN id or \"last\"", name)
	}
	if pos[0] != "last" {
		return pos[0], nil
	}
	l, err := cl.Runs(ctx)
	if err != nil {
		return "", err
	}
	if len(l.Runs) == 0 {
		return "", errdefs.Invalidf("%s: the tenant has no runs", name)
	}
	return l.Runs[0].ID, nil
}

// remoteRunError is a failed request about a run: a missing one as here.
func remoteRunError(stdio IO, err error) error {
	if errors.Is(err, remote.ErrNoRun) || errdefs.ExitCode(err) == errdefs.ExitUsage {
		return err
	}
	return clientError(stdio, err)
}

func gateLsRemote(c *cobra.Command, stdio IO, cl *remote.Client, asJSON bool) error {
	l, err := cl.Gates(c.Context())
	if err != nil {
		return clientError(stdio, err)
	}
	return printGateList(stdio, l, asJSON)
}

func gateShowRemote(c *cobra.Command, stdio IO, cl *remote.Client, id string, asJSON bool) error {
	s, err := cl.Gate(c.Context(), id)
	if errors.Is(err, remote.ErrNoRequest) {
		return errdefs.Exitf(errdefs.ExitFailure, "gate show: no pending request %q (see cordon gate ls)", id)
	}
	if err != nil {
		return clientError(stdio, err)
	}
	return printGateShow(stdio, s, asJSON)
}

func gateDecideRemote(c *cobra.Command, stdio IO, cl *remote.Client, verb, id, why string) error {
	_, err := cl.Decide(c.Context(), id, verb == "deny", why)
	if err != nil && !errors.Is(err, remote.ErrNoRequest) {
		return clientError(stdio, err)
	}
	return gateDecided(stdio, verb, id, err)
}

func auditLsRemote(c *cobra.Command, stdio IO, cl *remote.Client, asJSON bool) error {
	l, err := cl.Runs(c.Context())
	if err != nil {
		return clientError(stdio, err)
	}
	return printRuns(stdio, l, asJSON)
}

func auditShowRemote(c *cobra.Command, stdio IO, cl *remote.Client, args []string, diff, asJSON bool) error {
	id, err := remoteRunID(c.Context(), cl, "audit show", args)
	if err != nil {
		return remoteRunError(stdio, err)
	}
	s, err := cl.Run(c.Context(), id)
	if err != nil {
		return remoteRunError(stdio, err)
	}
	return printShown(stdio, s, diff, asJSON)
}

func auditVerifyRemote(c *cobra.Command, stdio IO, cl *remote.Client, args []string, asJSON bool) error {
	id, err := remoteRunID(c.Context(), cl, "audit verify", args)
	if err != nil {
		return remoteRunError(stdio, err)
	}
	v, err := cl.Verify(c.Context(), id)
	if err != nil {
		return remoteRunError(stdio, err)
	}
	return printVerified(stdio, v, asJSON)
}

// auditExportRemote writes the server's export of a run to -o; the server verifies
// the log first and refuses one that does not verify (there is no --force).
func auditExportRemote(c *cobra.Command, stdio IO, cl *remote.Client, args []string, o exportOptions) (err error) {
	id, err := remoteRunID(c.Context(), cl, "audit export", args)
	if err != nil {
		return remoteRunError(stdio, err)
	}
	w, closeOut, err := openOutput(stdio, o.out, serverRun{})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeOut()) }()
	err = cl.Export(c.Context(), id, o.format, w)
	if errors.Is(err, remote.ErrNotIntact) {
		return errdefs.Exitf(errdefs.ExitFailure, "%s: %s", id, errdefs.Message(err))
	}
	if err != nil {
		return remoteRunError(stdio, err)
	}
	return nil
}

// auditReportRemote writes the report of a server's run: its log exported (the server
// verifies it first and refuses one that does not verify) into a private temporary
// file, verified again here and rendered by the same code as a local report.
func auditReportRemote(c *cobra.Command, stdio IO, cl *remote.Client, args []string, out string) (err error) {
	id, err := remoteRunID(c.Context(), cl, "audit report", args)
	if err != nil {
		return remoteRunError(stdio, err)
	}
	dir, err := os.MkdirTemp("", "cordon-report-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	events := filepath.Join(dir, "events.jsonl")
	f, err := os.OpenFile(events, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	err = cl.Export(c.Context(), id, api.FormatJSONL, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	switch {
	case errors.Is(err, remote.ErrNotIntact):
		return errdefs.Exitf(errdefs.ExitFailure, "%s: %s", id, errdefs.Message(err))
	case err != nil:
		return remoteRunError(stdio, err)
	}
	return writeReport(stdio, events, out, serverRun{})
}

func auditFollowRemote(c *cobra.Command, stdio IO, cl *remote.Client, args []string, o followOptions) (err error) {
	id, err := remoteRunID(c.Context(), cl, "audit follow", args)
	if err != nil {
		return remoteRunError(stdio, err)
	}
	w, closeOut, err := followOutput(stdio, o.out, serverRun{})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeOut()) }()
	ctx, stop := withSignals(c.Context())
	defer stop()
	err = cl.Follow(ctx, id, o.format, w)
	switch {
	case errors.Is(err, remote.ErrNotIntact):
		return errdefs.Exitf(errdefs.ExitFailure, "%s: %s", id, errdefs.Message(err))
	case ctx.Err() != nil:
		return errdefs.Exit(errdefs.ExitFailure) // interrupted: what was read is written
	case err != nil:
		return remoteRunError(stdio, err)
	}
	return nil
}

func applyRemote(c *cobra.Command, stdio IO, cl *remote.Client, args []string, force bool) error {
	id, err := remoteRunID(c.Context(), cl, "apply", args[:1])
	if err != nil {
		return stageRemoteError(stdio, err)
	}
	res, err := cl.Apply(c.Context(), id, args[1:], force)
	if err != nil {
		return stageRemoteError(stdio, err)
	}
	printStage(stdio.Stderr, runner.StageResult{Conflicts: res.Conflicts, Refused: res.Refused})
	fmt.Fprintf(stdio.Stdout, "applied %d path(s) of run %s; %d still staged\n", len(res.Paths), id, res.Pending)
	return nil
}

func discardRemote(c *cobra.Command, stdio IO, cl *remote.Client, args []string) error {
	id, err := remoteRunID(c.Context(), cl, "discard", args)
	if err != nil {
		return stageRemoteError(stdio, err)
	}
	res, err := cl.Discard(c.Context(), id)
	if err != nil {
		return stageRemoteError(stdio, err)
	}
	fmt.Fprintf(stdio.Stdout, "discarded %d path(s) of run %s\n", len(res.Paths), id)
	return nil
}

// stageRemoteError is apply's and discard's failure on a server, as stageError's
// here: 1 for what the run's state refused (conflicts listed) or a missing run.
func stageRemoteError(stdio IO, err error) error {
	var se *remote.StageError
	switch {
	case errors.As(err, &se):
		printStage(stdio.Stderr, runner.StageResult{Conflicts: se.Conflicts, Refused: se.Refused})
		return errdefs.Exitf(errdefs.ExitFailure, "%s", se.Msg)
	case errors.Is(err, remote.ErrNoRun), errors.Is(err, audit.ErrRunNotFound):
		return errdefs.Exitf(errdefs.ExitFailure, "%s", errdefs.Message(err))
	case errdefs.ExitCode(err) == errdefs.ExitUsage:
		return err
	}
	return clientError(stdio, err)
}
