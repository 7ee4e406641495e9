// Package audit owns the audit log of a cordon run: its versioned record (the envelope
// of each line; the body of each event type is a struct of internal/event, which
// emitters build and [Record.DecodeBody] or event.DecodeBody read back), the
// hash-chained append-only writer (an [event.Sink]), secret redaction, reading, listing
// and verifying logs, and rendering them as a terminal timeline or a self-contained HTML
// report, both of which list first the changed files that build or CI tooling runs later
// outside the sandbox ([Classify]). The per-command workspace diff lives in the subpackage
// [github.com/cordonhq/cordon/audit/fsdiff].
//
// One run is one directory under the audit root, ROOT/RUNID/, holding events.jsonl and
// the patch files too large to inline. The format is documented field by field in
// docs/audit.md; only this package reads or writes it.
//
// A runner uses it in this order:
//
//	w, err := audit.Create(root, audit.NewRunID(time.Now()), audit.Options{Start: start})
//	// give w (an event.Sink) to the egress proxy, the broker, the monitor
//	tr, err := fsdiff.New(ctx, workspace, fsdiff.Options{})  // baseline
//	for each command {
//		cmd, err := w.StartCmd(audit.CmdStart{...})
//		// run it, teeing stdout/stderr into audit.NewCapture(0)
//		w.Emit(event.Event{Type: event.CmdEnd, Cmd: cmd, Body: audit.CmdEnd{...}})
//		res, err := tr.Diff(ctx)
//		err = w.RecordDiff(cmd, res)
//	}
//	err = w.Close(audit.RunEnd{ExitCode: code, Reason: audit.ReasonExited})
//
// and stops the run when [Writer.Failed] is closed (fail closed).
//
// This package is unstable until v1.
package audit
