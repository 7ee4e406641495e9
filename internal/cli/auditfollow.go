package cli

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"

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
			run, err := o.sel.run("audit follow", args)
			if err != nil {
				return err
			}
			if o.format != audit.FormatJSONL && o.format != audit.FormatOCSF {
				return errdefs.Usagef("audit follow: --format is jsonl or ocsf")
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
func followOutput(stdio IO, path string, run audit.Run) (io.Writer, func() error, error) {
	sock, ok := strings.CutPrefix(path, "unix:")
	if !ok {
		return openOutput(stdio, path, run)
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		return nil, nil, errdefs.Unavailablef("-o %s: %w", path, err)
	}
	return c, c.Close, nil
}
