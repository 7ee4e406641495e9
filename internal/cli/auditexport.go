package cli

import (
	"errors"
	"fmt"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/errdefs"
)

func auditExport(stdio IO, args []string) (err error) {
	fs := newFlags("audit export", "audit export [--audit-dir D] --format jsonl|ocsf [--force] [-o FILE] RUN|last [--all] [-c FILE]\n\n"+
		"jsonl is the log byte for byte; ocsf one OCSF "+audit.OCSFVersion+" event per line (docs/audit.md has the mapping).\n"+
		"A log that does not verify is refused (exit 1) unless --force.", stdio.Stderr)
	sel := runSelFlags(fs)
	format := fs.String("format", "", "`FORMAT`: jsonl or ocsf (required)")
	force := fs.Bool("force", false, "export a log that does not verify, as far as it can be read")
	out := fs.String("o", "-", "write to `FILE` (\"-\" for stdout)")
	run, err := sel.run(fs, args)
	if err != nil {
		return err
	}
	if *format != audit.FormatJSONL && *format != audit.FormatOCSF {
		fs.Usage()
		return errdefs.Usagef("audit export: --format jsonl or --format ocsf is required")
	}
	w, closeOut, err := openOutput(stdio, *out, run)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeOut()) }()
	rep, err := audit.Export(w, run.EventsPath(), audit.ExportOptions{Format: *format, Force: *force})
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
