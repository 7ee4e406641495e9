package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/errdefs"
)

// exportOptions are cordon audit export's flags.
type exportOptions struct {
	sel         runSel
	format, out string
	force       bool
}

func newAuditExportCmd(stdio IO) *cobra.Command {
	var o exportOptions
	c := &cobra.Command{
		Use:   "export [flags] --format jsonl|ocsf RUN|last",
		Short: "a verified log as --format jsonl (as is) or ocsf (for a SIEM)",
		Long: `Exports a run's log: jsonl is the log byte for byte; ocsf one OCSF ` + audit.OCSFVersion + ` event per line
(docs/audit.md has the mapping). A log that does not verify is refused (exit 1) unless --force.`,
		Example: `  cordon audit export last --format jsonl -o run.jsonl
  cordon audit export $run --format ocsf | my-collector`,
		ValidArgsFunction: completeRuns,
		RunE: func(c *cobra.Command, args []string) error {
			if o.format != audit.FormatJSONL && o.format != audit.FormatOCSF {
				return errdefs.Usagef("audit export: --format jsonl or --format ocsf is required")
			}
			if cl, err := remoteOf(c, append(runSelFlags, "force")...); err != nil || cl != nil {
				return orRemote(err, func() error { return auditExportRemote(c, stdio, cl, args, o) })
			}
			run, err := o.sel.run("audit export", args)
			if err != nil {
				return err
			}
			return auditExport(stdio, run, o)
		},
	}
	f := c.Flags()
	o.sel.flags(f)
	f.StringVar(&o.format, "format", "", "`FORMAT`: jsonl or ocsf (required)")
	f.BoolVar(&o.force, "force", false, "export a log that does not verify, as far as it can be read")
	f.StringVarP(&o.out, "output", "o", "-", "write to `FILE` (\"-\" for stdout)")
	return c
}

func auditExport(stdio IO, run audit.Run, o exportOptions) (err error) {
	w, closeOut, err := openOutput(stdio, o.out, run)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeOut()) }()
	rep, err := audit.Export(w, run.EventsPath(), audit.ExportOptions{Format: o.format, Force: o.force})
	var verr *audit.VerifyError
	if errors.As(err, &verr) {
		return errdefs.Exitf(errdefs.ExitFailure, "%s: NOT INTACT: %w (--force exports it anyway)", run.ID, verr)
	}
	if err != nil {
		return err
	}
	if !rep.OK() {
		fmt.Fprintf(stdio.Stderr, "%s: exported although NOT INTACT: %v\n", run.ID, rep.Problem)
	}
	return nil
}
