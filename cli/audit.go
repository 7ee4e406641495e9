package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cordonhq/cordon/internal/errdefs"

	"github.com/cordonhq/cordon/audit"
)

func newAuditCmd(stdio IO) *cobra.Command {
	c := group(stdio, &cobra.Command{
		Use:   "audit COMMAND",
		Short: "list, show, verify and report runs' audit logs",
		Long: `Lists, shows, verifies, reports, prunes, exports and follows the runs' audit logs (docs/audit.md).
A RUN is a run id, or last: the newest run of this workspace (the contract's, else the
current directory); last --all of any workspace.`,
		Example: `  cordon audit ls
  cordon audit show last --diff
  cordon audit verify last --audit-dir /var/lib/cordon/runs
  cordon audit report last -o report.html`,
	})
	c.AddCommand(newAuditLsCmd(stdio), newAuditShowCmd(stdio), newAuditVerifyCmd(stdio), newAuditReportCmd(stdio),
		newAuditPruneCmd(stdio), newAuditExportCmd(stdio), newAuditFollowCmd(stdio))
	return c
}

func auditDirFlag(f *pflag.FlagSet, p *string) {
	f.StringVar(p, "audit-dir", envOr("CORDON_AUDIT_DIR", ""), "audit root `DIR` ($CORDON_AUDIT_DIR; default $XDG_STATE_HOME/cordon/runs)")
}

func newAuditLsCmd(stdio IO) *cobra.Command {
	var dir string
	var asJSON bool
	c := &cobra.Command{
		Use:   "ls [flags]",
		Short: "runs, newest first",
		Long:  "Lists the runs of the audit root, newest first, and states the retention (on stderr).",
		Example: `  cordon audit ls
  cordon audit ls --json | jq -r '.runs[] | select(.workspace == env.PWD) | .id'`,
		Args: noArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if cl, err := remoteOf(c, "audit-dir"); err != nil || cl != nil {
				return orRemote(err, func() error { return auditLsRemote(c, stdio, cl, asJSON) })
			}
			return auditLs(stdio, dir, asJSON)
		},
	}
	auditDirFlag(c.Flags(), &dir)
	c.Flags().BoolVar(&asJSON, "json", false, `print {"schema": "`+schemaAuditLs+`", root, retention, runs: [{id, started, ended, contract, backend, workspace, commands, sealed, status, exit_code}]}`)
	return c
}

func auditLs(stdio IO, dir string, asJSON bool) error {
	root, err := auditRoot(dir)
	if err != nil {
		return err
	}
	runs, err := audit.List(root)
	if err != nil {
		return err
	}
	return printRuns(stdio, audit.NewListing(root, runs), asJSON)
}

// printRuns prints the runs of l, of this host's audit root or of a server's.
func printRuns(stdio IO, l audit.Listing, asJSON bool) error {
	if asJSON {
		return writeJSON(stdio.Stdout, l)
	}
	runs, root := l.Runs, l.Root
	tw := tabwriter.NewWriter(stdio.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tSTARTED\tCONTRACT\tBACKEND\tCOMMANDS\tSTATUS\tWORKSPACE")
	for _, r := range runs {
		contract := r.Contract
		if contract == "" {
			contract = "(built-in)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.ID, r.Started.UTC().Format("2006-01-02 15:04:05Z"), contract, r.Backend, r.Commands, r.Status, orNone(r.Workspace))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	noun := "runs"
	if len(runs) == 1 {
		noun = "run"
	}
	fmt.Fprintf(stdio.Stderr, "%d %s in %s; %s\n", len(runs), noun, root, l.Retention)
	return nil
}

func newAuditShowCmd(stdio IO) *cobra.Command {
	var sel runSel
	var diff, asJSON bool
	c := &cobra.Command{
		Use:   "show [flags] RUN|last",
		Short: "a run's timeline (--diff for patches, --json)",
		Long:  "Prints a run's timeline: every command, its changes, its network decisions and alerts.",
		Example: `  cordon audit show last
  cordon audit show last --diff
  cordon audit show 20261129T201530Z-3fa9c1 --json | jq '.events[] | select(.type == "net.deny")'`,
		ValidArgsFunction: completeRuns,
		RunE: func(c *cobra.Command, args []string) error {
			if cl, err := remoteOf(c, runSelFlags...); err != nil || cl != nil {
				return orRemote(err, func() error { return auditShowRemote(c, stdio, cl, args, diff, asJSON) })
			}
			run, err := sel.run("audit show", args)
			if err != nil {
				return err
			}
			return auditShow(stdio, run, diff, asJSON)
		},
	}
	sel.flags(c.Flags())
	c.Flags().BoolVar(&diff, "diff", false, "print each command's full patch")
	c.Flags().BoolVar(&asJSON, "json", false, `print {"schema": "`+schemaAuditShow+`", "show_version": 1, run, runs_later, events}`)
	return c
}

func auditShow(stdio IO, run audit.Run, diff, asJSON bool) error {
	recs, err := audit.ReadEvents(run.EventsPath())
	if err != nil {
		return err
	}
	return printShown(stdio, audit.NewShown(run.ID, recs), diff, asJSON)
}

// printShown prints a run's events, of this host or of a server.
func printShown(stdio IO, s audit.Shown, diff, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(stdio.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	}
	return audit.WriteTimeline(stdio.Stdout, s.Events, audit.TimelineOptions{Diff: diff})
}

func newAuditVerifyCmd(stdio IO) *cobra.Command {
	var sel runSel
	var asJSON bool
	c := &cobra.Command{
		Use:   "verify [flags] RUN|last",
		Short: "check a run's hash chain: exit 0 intact, 1 with the first bad line",
		Long: `Checks a run's hash chain and seal.

Exit status: 0 intact and sealed, 1 tampered or truncated (first bad line and why), 2 usage error.`,
		Example: `  cordon audit verify last
  cordon audit verify last --audit-dir /var/lib/cordon/runs
  cordon audit verify $run --json | jq .ok`,
		ValidArgsFunction: completeRuns,
		RunE: func(c *cobra.Command, args []string) error {
			if cl, err := remoteOf(c, runSelFlags...); err != nil || cl != nil {
				return orRemote(err, func() error { return auditVerifyRemote(c, stdio, cl, args, asJSON) })
			}
			run, err := sel.run("audit verify", args)
			if err != nil {
				return err
			}
			return auditVerify(stdio, run, asJSON)
		},
	}
	sel.flags(c.Flags())
	c.Flags().BoolVar(&asJSON, "json", false, `print {"schema": "`+schemaAuditVerify+`", run, ok, sealed, lines, head, problem: {line, kind, detail} or null}`)
	return c
}

func auditVerify(stdio IO, run audit.Run, asJSON bool) error {
	rep, err := audit.Verify(run.EventsPath())
	if err != nil && rep.Problem == nil {
		return err
	}
	return printVerified(stdio, audit.NewVerified(run.ID, rep), asJSON)
}

// printVerified prints what verifying a run found, here or on a server: exit 1 when
// it is not intact and sealed.
func printVerified(stdio IO, v audit.Verified, asJSON bool) error {
	if asJSON {
		if err := writeJSON(stdio.Stdout, v); err != nil {
			return err
		}
	}
	if !v.OK {
		if !asJSON {
			fmt.Fprintf(stdio.Stdout, "%s: NOT INTACT: %s\n", v.Run, problemText(v.Problem))
		}
		return errdefs.Exit(errdefs.ExitFailure)
	}
	if !asJSON {
		fmt.Fprintf(stdio.Stdout, "%s: intact and sealed, %d lines, head %s\n", v.Run, v.Lines, v.Head)
		if v.DiffGaps > 0 {
			fmt.Fprintf(stdio.Stdout, "%s: %d workspace diff(s) stopped at a limits.diff bound: "+
				"not the whole change (cordon audit show names what is missing)\n", v.Run, v.DiffGaps)
		}
	}
	return nil
}

// problemText is a verify problem as audit.VerifyError says it.
func problemText(p *audit.VerifyProblem) string {
	if p == nil {
		return "<nil>"
	}
	return (&audit.VerifyError{Line: p.Line, Kind: errors.New(p.Kind), Detail: p.Detail}).Error()
}

func newAuditReportCmd(stdio IO) *cobra.Command {
	var sel runSel
	var out string
	c := &cobra.Command{
		Use:   "report [flags] -o FILE RUN|last",
		Short: "one self-contained HTML page (-o FILE)",
		Long:  "Writes a run's report, verified, as one self-contained HTML page.",
		Example: `  cordon audit report last -o report.html
  cordon audit report -o - $run > report.html`,
		ValidArgsFunction: completeRuns,
		RunE: func(c *cobra.Command, args []string) error {
			if out == "" {
				return errdefs.Usagef("audit report: -o FILE is required")
			}
			if cl, err := remoteOf(c, runSelFlags...); err != nil || cl != nil {
				return orRemote(err, func() error { return auditReportRemote(c, stdio, cl, args, out) })
			}
			run, err := sel.run("audit report", args)
			if err != nil {
				return err
			}
			return auditReport(stdio, run, out)
		},
	}
	sel.flags(c.Flags())
	c.Flags().StringVarP(&out, "output", "o", "", "write the HTML report to `FILE` (\"-\" for stdout)")
	return c
}

func auditReport(stdio IO, run audit.Run, out string) error {
	return writeReport(stdio, run.EventsPath(), out, run)
}

// writeReport writes the report of the log at events, verified, to out (openOutput's
// -o of run).
func writeReport(stdio IO, events, out string, run outputRun) (err error) {
	recs, err := audit.ReadEvents(events)
	if err != nil {
		return err
	}
	rep, _ := audit.Verify(events)
	w, closeOut, err := openOutput(stdio, out, run)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeOut()) }()
	return audit.WriteHTML(w, recs, audit.HTMLOptions{Verify: &rep})
}

// outputRun is what openOutput needs of the run it writes about: an audit.Run of this
// host, or a server's run ([serverRun]), whose log and workspace are not here.
type outputRun interface {
	EventsPath() string
	Workspace() string
}

// serverRun is a run of a server's as an outputRun: nothing of it is on this host.
type serverRun struct{}

func (serverRun) EventsPath() string { return "" }
func (serverRun) Workspace() string  { return "" }

// openOutput is the -o FILE of a command that writes a file about run ("-": stdout,
// mode 0600 otherwise). FILE is often in the workspace the run's sandbox wrote: there
// it is opened through an [os.Root] of the workspace, so no symbolic link the sandbox
// planted, in FILE or in any directory on the way, leads the write outside it (it would
// create or truncate whatever it names on the host). Elsewhere a link as FILE itself is
// refused. Anything but a regular file is refused, and so is the run's own log. Its
// close reports a write the file system failed to keep, so an export is never silently
// short.
func openOutput(stdio IO, path string, run outputRun) (io.Writer, func() error, error) {
	if path == "-" {
		return stdio.Stdout, func() error { return nil }, nil
	}
	if st, err := os.Lstat(path); err == nil {
		if !st.Mode().IsRegular() {
			return nil, nil, errdefs.Invalidf("-o %s: not a regular file (%s); refusing to write through it", path, st.Mode().Type())
		}
		if kst, err := os.Stat(run.EventsPath()); run.EventsPath() != "" && err == nil && os.SameFile(st, kst) {
			return nil, nil, errdefs.Invalidf("-o %s is the log being read", path)
		}
	}
	const flags = os.O_CREATE | os.O_TRUNC | os.O_WRONLY | syscall.O_NOFOLLOW
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, nil, errdefs.Invalidf("-o %s: %w", path, err)
	}
	if ws, rel, ok := inWorkspace(abs, run.Workspace()); ok {
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
	f, err := os.OpenFile(abs, flags, 0o600)
	if err != nil {
		return nil, nil, err
	}
	return f, f.Close, nil
}

// inWorkspace reports whether abs names something inside the workspace ws, by identity
// rather than spelling: the nearest of abs's ancestors that is ws itself (found through
// whatever links the caller's path takes, as the kernel would follow them) and the rest
// of abs below it. The rest is then opened through an os.Root of that directory, so no
// link in it leaves the workspace.
func inWorkspace(abs, ws string) (dir, rel string, ok bool) {
	if ws == "" {
		return "", "", false
	}
	wst, err := os.Stat(ws)
	if err != nil {
		return "", "", false
	}
	for d := filepath.Dir(abs); ; d = filepath.Dir(d) {
		if st, err := os.Stat(d); err == nil && os.SameFile(st, wst) {
			rel, err := filepath.Rel(d, abs)
			return d, rel, err == nil && filepath.IsLocal(rel)
		}
		if d == filepath.Dir(d) {
			return "", "", false
		}
	}
}
