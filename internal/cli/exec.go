package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	"github.com/cordonhq/cordon/internal/errdefs"

	"github.com/cordonhq/cordon/session"
)

// defaultJSONCap is --cap's default with --json: what fits a model's context window.
const defaultJSONCap = 10000

// execCmd runs one command in a session: `cordon exec SESSION [--timeout D] [--cap N]
// [--json] [--dir DIR] [-i] -- CMD [ARGS...]`.
func execCmd(ctx context.Context, stdio IO, args []string) error {
	fs := newFlags("exec", "exec SESSION [--timeout D] [--cap N] [--json] [--dir DIR] [-i] -- CMD [ARGS...]", stdio.Stderr)
	timeout := fs.Duration("timeout", 0, "per-command timeout, overriding commands.timeout")
	dir := fs.String("dir", "", "working `DIR` inside (default: the current directory when it is in the workspace, else the contract's workdir)")
	asJSON := fs.Bool("json", false, "print a versioned JSON object {v, exit_code, stdout, stderr, truncated, spill_path, duration_ms, diffstat, denied_egress, denied, ...} and exit 0 unless cordon failed")
	capN := fs.Int("cap", -1, "keep at most `N` characters of each of stdout and stderr; the whole output goes to a spill file inside the sandbox, named on the last line (default 10000 with --json, else no cap; 0: no cap)")
	stdin := fs.Bool("i", false, "forward standard input to the command (default: it reads an empty stdin)")
	var id string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		id, args = args[0], args[1:]
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	argv := fs.Args()
	if id == "" && len(argv) > 0 {
		id, argv = argv[0], argv[1:]
	}
	if id == "" || len(argv) == 0 {
		fs.Usage()
		return errdefs.Usagef("exec: give a SESSION and a command (cordon exec SESSION -- CMD [ARGS...])")
	}
	if *timeout < 0 {
		return errdefs.Usagef("exec: --timeout must be positive")
	}
	if *capN < 0 {
		*capN = 0
		if *asJSON {
			*capN = defaultJSONCap
		}
	}
	sess, err := session.Open(id)
	if err != nil {
		return clientError(stdio, err)
	}
	o := session.ExecOptions{Dir: *dir, Timeout: *timeout, Cap: *capN}
	if o.Dir == "" {
		o.Dir = cwdIn(sess.Info().Workspace)
	}
	if *stdin {
		o.Stdin = stdio.Stdin
	}
	if !*asJSON {
		o.Stdout, o.Stderr = stdio.Stdout, stdio.Stderr
	}
	res, err := sess.Exec(ctx, argv, o)
	if err != nil {
		return clientError(stdio, err)
	}
	if *asJSON {
		return json.NewEncoder(stdio.Stdout).Encode(res)
	}
	ending{denied: res.Denied, alerts: res.Alerts}.print(stdio.Stderr)
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
