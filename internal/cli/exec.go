package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cordonhq/cordon/internal/errdefs"

	"github.com/cordonhq/cordon/session"
	"github.com/cordonhq/cordon/session/wire"
)

// defaultJSONCap is --cap's default with --json: what fits a model's context window.
const defaultJSONCap = 10000

// execOptions are cordon exec's flags.
type execOptions struct {
	timeout time.Duration
	dir     string
	asJSON  bool
	capN    int
	stdin   bool
}

func newExecCmd(stdio IO) *cobra.Command {
	var o execOptions
	c := &cobra.Command{
		Use:   "exec [flags] SESSION [flags] [--] CMD [ARGS...]",
		Short: "run a command in a session",
		Long: `Runs CMD in the sandbox of session SESSION (cordon session start) and exits with its
status. Flags go before or after SESSION and end at CMD: everything from CMD on is CMD's.

Exit status: CMD's own (with --json: 0 unless cordon failed); 124 when the timeout killed
it; 125 when cordon could not run it (no such session, a refused command); 137 when the
monitor stopped it; 2 for a usage error or a bad request.`,
		Example: `  cordon exec $id -- go build ./...
  cordon exec $id --timeout 30s -- go test ./...
  cordon exec $id --json -- make          # {"schema": "cordon.exec/v1", "exit_code": ...}
  cordon exec $id -i -- patch -p1 < fix.diff`,
		ValidArgsFunction: completeSessions,
		RunE: func(c *cobra.Command, args []string) error {
			id, argv, err := execArgs(c, args)
			if err != nil || id == "" {
				return err
			}
			return execCmd(c.Context(), stdio, o, id, argv)
		},
	}
	f := c.Flags()
	f.SetInterspersed(false) // as docker exec: the command's flags are its own
	f.DurationVar(&o.timeout, "timeout", 0, "per-command timeout, overriding commands.timeout")
	f.StringVar(&o.dir, "dir", "", "working `DIR` inside (default: the current directory when it is in the workspace, else the contract's workdir)")
	f.BoolVar(&o.asJSON, "json", false, "print one JSON object {schema, v, exit_code, stdout, stderr, truncated, spill_path, duration_ms, diffstat, denied_egress, denied, ...} and exit 0 unless cordon failed")
	f.IntVar(&o.capN, "cap", -1, "keep at most `N` characters of each of stdout and stderr; the whole output goes to a spill file inside the sandbox, named on the last line (default 10000 with --json, else no cap; 0: no cap)")
	f.BoolVarP(&o.stdin, "interactive", "i", false, "forward standard input to the command (default: it reads an empty stdin)")
	return c
}

// execArgs splits exec's arguments into SESSION and the command, parsing the flags
// between them (cordon exec ID --json -- CMD). Flags after "--", or after CMD's first
// word, are the command's. id is "" when --help was asked for (and printed).
func execArgs(c *cobra.Command, args []string) (id string, argv []string, err error) {
	dashed := c.ArgsLenAtDash() >= 0 // "--" before SESSION: no flags after it
	if len(args) > 0 {
		id, argv = args[0], args[1:]
	}
	if !dashed && len(argv) > 0 {
		if err := c.Flags().Parse(argv); err != nil {
			return "", nil, usageError(c, err)
		}
		if help, _ := c.Flags().GetBool("help"); help {
			return "", nil, c.Help()
		}
		argv = c.Flags().Args()
	}
	if id == "" || len(argv) == 0 {
		return "", nil, errdefs.Usagef("exec: give a SESSION and a command (cordon exec SESSION -- CMD [ARGS...])")
	}
	return id, argv, nil
}

// execCmd runs argv in session id.
func execCmd(ctx context.Context, stdio IO, o execOptions, id string, argv []string) error {
	if o.timeout < 0 {
		return errdefs.Usagef("exec: --timeout must be positive")
	}
	if o.capN < 0 {
		o.capN = 0
		if o.asJSON {
			o.capN = defaultJSONCap
		}
	}
	sess, err := session.Open(id)
	if err != nil {
		return clientError(stdio, err)
	}
	eo := session.ExecOptions{Dir: o.dir, Timeout: o.timeout, Cap: o.capN}
	if eo.Dir == "" {
		eo.Dir = cwdIn(sess.Info().Workspace)
	}
	if o.stdin {
		eo.Stdin = stdio.Stdin
	}
	if !o.asJSON {
		eo.Stdout, eo.Stderr = stdio.Stdout, stdio.Stderr
	}
	res, err := sess.Exec(ctx, argv, eo)
	if err != nil {
		return clientError(stdio, err)
	}
	if o.asJSON {
		return json.NewEncoder(stdio.Stdout).Encode(struct {
			Schema string `json:"schema"`
			*wire.Result
		}{schemaExec, res})
	}
	ending{denied: res.Denied, more: res.DeniedMore, alerts: res.Alerts}.print(stdio.Stderr)
	if res.ExitCode != 0 {
		return errdefs.Exit(res.ExitCode)
	}
	return nil
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
