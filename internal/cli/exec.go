package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cordonhq/cordon/internal/errdefs"
)

// execCmd runs one command in a session: `cordon exec SESSION [--timeout D] [--json]
// [--dir DIR] -- CMD [ARGS...]`.
func execCmd(ctx context.Context, stdio IO, args []string) error {
	fs := newFlags("exec", "exec SESSION [--timeout D] [--dir DIR] [--json] -- CMD [ARGS...]", stdio.Stderr)
	timeout := fs.Duration("timeout", 0, "per-command timeout, overriding commands.timeout")
	dir := fs.String("dir", "", "working `DIR` inside (default: the current directory when it is in the workspace, else the contract's workdir)")
	asJSON := fs.Bool("json", false, "print a versioned JSON object {v, exit_code, stdout, stderr, duration_ms, diffstat, denied_egress, ...} and exit 0 unless cordon failed")
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
		return &ExitError{Code: 2, Msg: "exec: give a SESSION and a command (cordon exec SESSION -- CMD [ARGS...])"}
	}
	if *timeout < 0 {
		return &ExitError{Code: 2, Msg: "exec: --timeout must be positive"}
	}
	conn, si, err := dialSession(id)
	if err != nil {
		return reportRunError(stdio, fmt.Errorf("%w: %v", errdefs.ErrUnavailable, err))
	}
	defer conn.Close()
	req := sessionRequest{Op: "exec", Argv: argv, Dir: *dir, TimeoutMS: timeout.Milliseconds()}
	if req.Dir == "" {
		if wd, err := os.Getwd(); err == nil && si.Workspace != "" {
			if rel, err := filepath.Rel(si.Workspace, wd); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
				req.Dir = wd
			}
		}
	}
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return reportRunError(stdio, err)
	}
	var out, errOut strings.Builder
	dec := json.NewDecoder(conn)
	for {
		var f sessionFrame
		if err := dec.Decode(&f); err != nil {
			fmt.Fprintf(stdio.Stderr, "cordon: session %s ended before the command's result: %v\n", id, err)
			return &ExitError{Code: errdefs.ExitCannotRun}
		}
		switch {
		case f.Error != "":
			fmt.Fprintf(stdio.Stderr, "cordon: %s\n", f.Error)
			code := f.Code
			if code == 0 {
				code = errdefs.ExitCannotRun
			}
			return &ExitError{Code: code}
		case f.Result != nil:
			if !*asJSON {
				if f.Result.ExitCode != 0 {
					return &ExitError{Code: f.Result.ExitCode}
				}
				return nil
			}
			r := f.Result
			r.Stdout, r.Stderr = out.String(), errOut.String()
			if r.DeniedEgress == nil {
				r.DeniedEgress = []string{}
			}
			enc := json.NewEncoder(stdio.Stdout)
			return enc.Encode(r)
		case f.FD == 1:
			if *asJSON {
				out.Write(f.Data)
			} else {
				_, _ = stdio.Stdout.Write(f.Data)
			}
		case f.FD == 2:
			if *asJSON {
				errOut.Write(f.Data)
			} else {
				_, _ = stdio.Stderr.Write(f.Data)
			}
		}
	}
}
