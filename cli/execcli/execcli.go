// Package execcli is `cordon exec`'s whole behaviour on the command line: its flags,
// running the command in a session through the [session] client, the --json document
// (cordon.exec/v1), the lines it ends with on stderr and its exit status. Both entry
// points run it: `cordon exec` (cli, a thin cobra wrapper that hands it its
// raw arguments) and the small cordon-exec binary (cmd/cordon-exec), which links only
// this and the client so that a warm exec in a harness loop starts fast. Nothing here
// may link cobra, the runner or anything else the client does not need
// (internal/deps_test.go holds cordon-exec to that).
package execcli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cordonhq/cordon/cli/ending"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/trace"
	"github.com/cordonhq/cordon/session"
	"github.com/cordonhq/cordon/session/wire"
)

// Schema is the schema of exec's --json document.
const Schema = "cordon.exec/v1"

// defaultJSONCap is --cap's default with --json: what fits a model's context window.
const defaultJSONCap = 10000

// ErrHelp is returned by [Run] when -h or --help was given: the caller prints the help
// its way (cobra's for cordon exec, [WriteHelp] for cordon-exec) and exits 0.
var ErrHelp = errors.New("help requested")

// IO is where exec reads and writes, and how it reaches a server.
type IO struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// OpenRemote opens session id on the server r names (`cordon exec --host`); nil
	// where exec reaches no server (cordon-exec, which links no HTTP), and a host set
	// there is refused rather than run here.
	OpenRemote func(ctx context.Context, r Remote, id string) (Session, error)
}

// Run runs exec with args, everything after `cordon exec` (or `cordon-exec`). prog
// names the command in usage errors ("cordon exec"). Its error says how to exit:
// errdefs.ExitCode is the status, errdefs.Message what to print when not already
// printed (errdefs.Reported).
func Run(ctx context.Context, stdio IO, prog string, args []string) error {
	o, id, argv, err := parseArgs(args)
	if err != nil {
		return errdefs.Usagef("exec: %w; see %s --help", err, prog)
	}
	if o.help {
		return ErrHelp
	}
	if id == "" || len(argv) == 0 {
		return errdefs.Usagef("exec: give a SESSION and a command (%s SESSION -- CMD [ARGS...])", prog)
	}
	return run(ctx, stdio, prog, o, id, argv)
}

// run runs argv in session id.
func run(ctx context.Context, stdio IO, prog string, o options, id string, argv []string) error {
	if o.timeout < 0 {
		return errdefs.Usagef("exec: --timeout must be positive")
	}
	if o.capN < 0 {
		o.capN = 0
		if o.asJSON {
			o.capN = defaultJSONCap
		}
	}
	if o.remote.Host == "" && o.remote != (Remote{}) && o.remote.WithEnv().Host == "" {
		return errdefs.Usagef("exec: --token-file, --tls-ca, --tls-cert and --tls-key need --host (or $CORDON_HOST)")
	}
	if o.trace != "" {
		if err := trace.Open(o.trace, strings.ReplaceAll(prog, " ", "-")); err != nil {
			return ReportError(stdio.Stderr, errdefs.Invalidf("exec: --trace: %w", err))
		}
	}
	eo := session.ExecOptions{Dir: o.dir, Timeout: o.timeout, Cap: o.capN}
	span := trace.Begin("exec.open")
	sess, err := open(ctx, stdio, prog, o.remote.WithEnv(), id, &eo)
	span.End()
	if err != nil {
		return err
	}
	if o.stdin {
		eo.Stdin = stdio.Stdin
	}
	if !o.asJSON {
		eo.Stdout, eo.Stderr = stdio.Stdout, stdio.Stderr
	}
	span = trace.Begin("exec.request")
	res, err := sess.Exec(ctx, argv, eo)
	span.End()
	if err != nil {
		return ReportError(stdio.Stderr, err)
	}
	if o.asJSON {
		return json.NewEncoder(stdio.Stdout).Encode(struct {
			Schema string `json:"schema"`
			*wire.Result
		}{Schema, res})
	}
	ending.Summary{Denied: res.Denied, More: res.DeniedMore, Alerts: res.Alerts}.Print(stdio.Stderr)
	if res.ExitCode != 0 {
		return errdefs.Exit(res.ExitCode)
	}
	return nil
}

// open opens session id: on the server r names, else of this host, where the command
// runs in the current directory when it is in the session's workspace (a server's
// workspace is not a directory here).
func open(ctx context.Context, stdio IO, prog string, r Remote, id string, eo *session.ExecOptions) (Session, error) {
	if r.Host != "" {
		if stdio.OpenRemote == nil {
			return nil, errdefs.Usagef("exec: %s reaches no server, and --host (or $CORDON_HOST) is set: use cordon exec --host", prog)
		}
		s, err := stdio.OpenRemote(ctx, r, id)
		if err != nil {
			return nil, ReportError(stdio.Stderr, err)
		}
		return s, nil
	}
	s, err := session.Open(id)
	if err != nil {
		return nil, ReportError(stdio.Stderr, err)
	}
	if eo.Dir == "" {
		eo.Dir = cwdIn(s.Info().Workspace)
	}
	return s, nil
}

// ReportError reports a session client's failure on one line of w: 125 (cordon could
// not do it) unless the supervisor said otherwise (a [session.Error] carries its
// status). The error it returns carries that status and is already printed.
func ReportError(w io.Writer, err error) error {
	err = errdefs.CannotRun(err)
	fmt.Fprintf(w, "cordon: %s\n", errdefs.Message(err))
	return errdefs.Reported(err)
}

// cwdIn is the current directory when it is inside the workspace ws, else "".
func cwdIn(ws string) string {
	wd, err := os.Getwd()
	if err != nil || ws == "" {
		return ""
	}
	if rel, err := filepath.Rel(ws, wd); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
		return wd
	}
	return ""
}
