package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"text/tabwriter"

	"github.com/cordonhq/cordon/internal/errdefs"

	"github.com/cordonhq/cordon/audit"
)

// auditJSONVersion versions `cordon audit show --json`.
const auditJSONVersion = 1

func auditCmd(ctx context.Context, stdio IO, args []string) error {
	subs := map[string]func(IO, []string) error{
		"ls": auditLs, "show": auditShow, "verify": auditVerify, "report": auditReport,
		"prune": auditPrune, "export": auditExport, "follow": auditFollow,
	}
	if len(args) == 0 || subs[args[0]] == nil {
		fmt.Fprintln(stdio.Stderr, "Usage: cordon audit ls|show|verify|report|prune|export|follow [flags] [RUN|last]\n\n"+
			"  ls       runs, newest first\n  show     a run's timeline (--diff for patches, --json)\n"+
			"  verify   check a run's hash chain: exit 0 intact, 1 with the first bad line\n"+
			"  report   one self-contained HTML page (-o FILE)\n"+
			"  prune    remove sealed runs: --older-than D | --keep N (per workspace)\n"+
			"  export   a verified log as --format jsonl (as is) or ocsf (for a SIEM)\n"+
			"  follow   a run's events as they are logged, to stdout or a unix socket, until its seal\n\n"+
			"last is the newest run of this workspace (the contract's, else the current directory); last --all of any.")
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return nil
		}
		return errdefs.Exit(errdefs.ExitUsage)
	}
	return subs[args[0]](stdio, args[1:])
}

func auditDirFlag(fs *flag.FlagSet) *string {
	return fs.String("audit-dir", envOr("CORDON_AUDIT_DIR", ""), "audit root `DIR` ($CORDON_AUDIT_DIR; default $XDG_STATE_HOME/cordon/runs)")
}

func auditLs(stdio IO, args []string) error {
	fs := newFlags("audit ls", "audit ls [--audit-dir D]", stdio.Stderr)
	dir := auditDirFlag(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	root, err := auditRoot(*dir)
	if err != nil {
		return err
	}
	runs, err := audit.List(root)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdio.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tSTARTED\tCONTRACT\tBACKEND\tCOMMANDS\tSTATUS")
	for _, r := range runs {
		contract := r.ContractPath
		if contract == "" {
			contract = "(built-in)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", r.ID, r.Start.Format("2006-01-02 15:04:05Z"), contract, r.Backend, r.Commands, r.Status())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	noun := "runs"
	if len(runs) == 1 {
		noun = "run"
	}
	fmt.Fprintf(stdio.Stderr, "%d %s in %s; %s\n", len(runs), noun, root, retentionNote)
	return nil
}

func auditShow(stdio IO, args []string) error {
	fs := newFlags("audit show", "audit show [--audit-dir D] [--diff] [--json] RUN|last [--all] [-c FILE]", stdio.Stderr)
	sel := runSelFlags(fs)
	diff := fs.Bool("diff", false, "print each command's full patch")
	asJSON := fs.Bool("json", false, "print the run's events, and its runs-later files, as JSON")
	run, err := sel.run(fs, args)
	if err != nil {
		return err
	}
	recs, err := audit.ReadEvents(run.EventsPath())
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdio.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Version   int                   `json:"show_version"`
			Run       string                `json:"run"`
			RunsLater []audit.RunsLaterFile `json:"runs_later"` // added within version 1
			Events    []audit.Record        `json:"events"`
		}{auditJSONVersion, run.ID, audit.RunsLater(recs), recs})
	}
	return audit.WriteTimeline(stdio.Stdout, recs, audit.TimelineOptions{Diff: *diff})
}

func auditVerify(stdio IO, args []string) error {
	fs := newFlags("audit verify", "audit verify [--audit-dir D] RUN|last [--all] [-c FILE]\n\nExit status: 0 intact and sealed, 1 tampered or truncated (first bad line and why), 2 usage error.", stdio.Stderr)
	sel := runSelFlags(fs)
	run, err := sel.run(fs, args)
	if err != nil {
		return err
	}
	rep, err := audit.Verify(run.EventsPath())
	if err != nil && rep.Problem == nil {
		return err
	}
	if !rep.OK() {
		fmt.Fprintf(stdio.Stdout, "%s: NOT INTACT: %v\n", run.ID, rep.Problem)
		return errdefs.Exit(errdefs.ExitFailure)
	}
	fmt.Fprintf(stdio.Stdout, "%s: intact and sealed, %d lines, head %s\n", run.ID, rep.Lines, rep.Head)
	return nil
}

func auditReport(stdio IO, args []string) (err error) {
	fs := newFlags("audit report", "audit report [--audit-dir D] -o FILE RUN|last [--all] [-c FILE]", stdio.Stderr)
	sel := runSelFlags(fs)
	out := fs.String("o", "", "write the HTML report to `FILE` (\"-\" for stdout)")
	run, err := sel.run(fs, args)
	if err != nil {
		return err
	}
	if *out == "" {
		fs.Usage()
		return errdefs.Usagef("audit report: -o FILE is required")
	}
	recs, err := audit.ReadEvents(run.EventsPath())
	if err != nil {
		return err
	}
	rep, _ := audit.Verify(run.EventsPath())
	w, closeOut, err := openOutput(stdio, *out, run)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeOut()) }()
	return audit.WriteHTML(w, recs, audit.HTMLOptions{Verify: &rep})
}

// openOutput is the -o FILE of a command that writes a file about run ("-": stdout,
// mode 0600 otherwise). FILE is often in the workspace the run's sandbox wrote: there
// it is opened through an [os.Root] of the workspace, so no symbolic link the sandbox
// planted, in FILE or in any directory on the way, leads the write outside it (it would
// create or truncate whatever it names on the host). Elsewhere a link as FILE itself is
// refused. Anything but a regular file is refused, and so is the run's own log. Its
// close reports a write the file system failed to keep, so an export is never silently
// short.
func openOutput(stdio IO, path string, run audit.Run) (io.Writer, func() error, error) {
	if path == "-" {
		return stdio.Stdout, func() error { return nil }, nil
	}
	if st, err := os.Lstat(path); err == nil {
		if !st.Mode().IsRegular() {
			return nil, nil, errdefs.Invalidf("-o %s: not a regular file (%s); refusing to write through it", path, st.Mode().Type())
		}
		if kst, err := os.Stat(run.EventsPath()); err == nil && os.SameFile(st, kst) {
			return nil, nil, errdefs.Invalidf("-o %s is the log being read", path)
		}
	}
	const flags = os.O_CREATE | os.O_TRUNC | os.O_WRONLY | syscall.O_NOFOLLOW
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, nil, errdefs.Invalidf("-o %s: %w", path, err)
	}
	if ws := run.Workspace(); ws != "" {
		if rel, err := filepath.Rel(ws, abs); err == nil && filepath.IsLocal(rel) {
			root, err := os.OpenRoot(ws)
			if err != nil {
				return nil, nil, err
			}
			defer root.Close()
			f, err := root.OpenFile(rel, flags, 0o600)
			if err != nil {
				return nil, nil, errdefs.Invalidf("-o %s: %w (a symbolic link in the run's workspace is not followed out of it)", path, err)
			}
			return f, f.Close, nil
		}
	}
	f, err := os.OpenFile(abs, flags, 0o600)
	if err != nil {
		return nil, nil, err
	}
	return f, f.Close, nil
}
