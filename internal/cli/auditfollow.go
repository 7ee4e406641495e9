package cli

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/runner"
)

func auditFollow(stdio IO, args []string) (err error) {
	fs := newFlags("audit follow", "audit follow [--audit-dir D] [--format jsonl|ocsf] [-o FILE|unix:PATH] RUN|last [--all] [-c FILE]\n\n"+
		"Streams a run's events as they are logged, from its first line, until its run.end seal: for a\n"+
		"collector (jsonl is the log's own lines; ocsf as audit export writes it). Each line is checked\n"+
		"as audit verify checks it before it is written. -o unix:PATH writes to a listening unix socket.\n"+
		"Exits 0 at the seal, 1 when a line does not verify or the run stopped without sealing its log.", stdio.Stderr)
	sel := runSelFlags(fs)
	format := fs.String("format", audit.FormatJSONL, "`FORMAT`: jsonl or ocsf")
	out := fs.String("o", "-", "write to `FILE`, or to the unix socket unix:PATH (\"-\" for stdout)")
	run, err := sel.run(fs, args)
	if err != nil {
		return err
	}
	if *format != audit.FormatJSONL && *format != audit.FormatOCSF {
		fs.Usage()
		return errdefs.Usagef("audit follow: --format is jsonl or ocsf")
	}
	w, closeOut, err := followOutput(stdio, *out, run)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeOut()) }()
	ctx, stop := withSignals(context.Background())
	defer stop()
	root := paths.RunRoot()
	st := audit.NewStream(w, *format)
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
