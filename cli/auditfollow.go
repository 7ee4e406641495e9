package cli

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/runner"
)

// followOptions are cordon audit follow's flags.
type followOptions struct {
	sel         runSel
	format, out string
}

func newAuditFollowCmd(stdio IO) *cobra.Command {
	var o followOptions
	c := &cobra.Command{
		Use:   "follow [flags] RUN|last",
		Short: "a run's events as they are logged, to stdout or a unix socket, until its seal",
		Long: `Streams a run's events as they are logged, from its first line, until its run.end seal: for a
collector (jsonl is the log's own lines; ocsf as audit export writes it). Each line is checked
as audit verify checks it before it is written. -o unix:PATH writes to a unix socket a collector
listens on. Exits 0 at the seal, 1 when a line does not verify or the run stopped without
sealing its log.`,
		Example: `  cordon audit follow last
  cordon audit follow $session --format ocsf -o unix:/run/collector.sock`,
		ValidArgsFunction: completeRuns,
		RunE: func(c *cobra.Command, args []string) error {
			if o.format != audit.FormatJSONL && o.format != audit.FormatOCSF {
				return errdefs.Usagef("audit follow: --format is jsonl or ocsf")
			}
			if cl, err := remoteOf(c, runSelFlags...); err != nil || cl != nil {
				return orRemote(err, func() error { return auditFollowRemote(c, stdio, cl, args, o) })
			}
			run, err := o.sel.run("audit follow", args)
			if err != nil {
				return err
			}
			return auditFollow(stdio, run, o)
		},
	}
	f := c.Flags()
	o.sel.flags(f)
	f.StringVar(&o.format, "format", audit.FormatJSONL, "`FORMAT`: jsonl or ocsf")
	f.StringVarP(&o.out, "output", "o", "-", "write to `FILE`, or to the unix socket unix:PATH (\"-\" for stdout)")
	return c
}

func auditFollow(stdio IO, run audit.Run, o followOptions) (err error) {
	w, closeOut, err := followOutput(stdio, o.out, run)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeOut()) }()
	ctx, stop := withSignals(context.Background())
	defer stop()
	root := paths.RunRoot()
	st := audit.NewStream(w, o.format)
	_, err = audit.Follow(ctx, run.EventsPath(), audit.FollowOptions{Live: func() bool { return runner.Live(root, run.ID) }},
		func(line []byte, rec audit.Record) error { return st.Write(line, rec) })
	var verr *audit.VerifyError
	if errors.As(err, &verr) {
		return errdefs.Exitf(errdefs.ExitFailure, "%s: NOT INTACT: %w", run.ID, verr)
	}
	if ctx.Err() != nil {
		return errdefs.Exit(errdefs.ExitFailure) // interrupted: what was read is written
	}
	return err
}

// followOutput is -o of audit follow: a file as openOutput opens it, or a unix socket
// a collector listens on.
func followOutput(stdio IO, path string, run outputRun) (io.Writer, func() error, error) {
	sock, ok := strings.CutPrefix(path, "unix:")
	if !ok {
		return openOutput(stdio, path, run)
	}
	if err := checkCollector(sock, run); err != nil {
		return nil, nil, err
	}
	// The file's owner says nothing of who answers on it (another user may rename a
	// socket of its own over it after the check): the peer must be this user or root.
	c, err := paths.DialSocket(context.Background(), sock, os.Geteuid())
	if err != nil {
		return nil, nil, errdefs.Unavailablef("-o %s: %w", path, err)
	}
	return c, c.Close, nil
}

// checkCollector refuses a collector's socket the run's sandbox could have planted: one
// inside the run's workspace, or one another user owns (a sandbox's files belong to its
// own uid). The stream carries the whole log, the contract's wording included, which the
// workload is never shown.
func checkCollector(sock string, run outputRun) error {
	abs, err := filepath.Abs(sock)
	if err != nil {
		return errdefs.Invalidf("-o unix:%s: %w", sock, err)
	}
	if _, _, inside := inWorkspace(abs, run.Workspace()); inside {
		return errdefs.Invalidf("-o unix:%s: the socket is in the run's workspace, where its sandbox could have made it", sock)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return errdefs.Unavailablef("-o unix:%s: %w", sock, err)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Geteuid() {
		return errdefs.Invalidf("-o unix:%s: the socket belongs to uid %d, not to you", sock, sys.Uid)
	}
	return nil
}
