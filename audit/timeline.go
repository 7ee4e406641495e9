package audit

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"time"
)

// TimelineOptions tunes WriteTimeline.
type TimelineOptions struct {
	Diff bool // print each command's patch under it
}

const timeLayout = "2006-01-02 15:04:05.000Z"

// WriteTimeline writes a run as a human timeline: a header; the runs-later files (see
// [Classify]), to review first; then each command with its exit code, duration and
// diffstat, and beside it the network decisions, alerts and credential events it
// caused; events of no command; and how the run ended ("UNSEALED" when the log has no
// run.end). Every string from the log is escaped so that control characters cannot act
// on the terminal.
func WriteTimeline(w io.Writer, recs []Record, opts TimelineOptions) error {
	v := buildView(recs)
	bw := bufio.NewWriter(w)
	writeHeader(bw, v)
	writeLater(bw, v)
	for _, c := range v.Commands {
		writeCommand(bw, c, opts)
	}
	if len(v.Loose) > 0 {
		fmt.Fprintf(bw, "\noutside any command\n")
		for _, n := range v.Loose {
			writeNote(bw, n)
		}
	}
	writeEnd(bw, v)
	writeStaged(bw, v)
	for _, b := range v.Bad {
		fmt.Fprintf(bw, "warning: %s\n", clean(b))
	}
	return bw.Flush()
}

func writeHeader(w io.Writer, v *view) {
	s := v.Start
	fmt.Fprintf(w, "run %s  backend %s  contract %s (%s)\n", clean(v.ID), clean(s.Backend),
		clean(s.ContractPath), clean(s.ContractDigest))
	fmt.Fprintf(w, "started %s by %s on %s, cordon %s", v.Started.UTC().Format(timeLayout),
		clean(s.User), clean(s.Host), clean(s.CordonVersion))
	if s.Workspace != "" {
		fmt.Fprintf(w, ", workspace %s", clean(s.Workspace))
	}
	if s.SandboxUID != 0 {
		fmt.Fprintf(w, ", sandbox uid %d", s.SandboxUID)
	}
	fmt.Fprintln(w)
}

func writeCommand(w io.Writer, c *cmdView, opts TimelineOptions) {
	fmt.Fprintf(w, "\n[%s] %s $ %s\n", clean(c.ID), c.Started.UTC().Format("15:04:05.000"), argv(c.Start.Argv))
	status := "did not finish"
	if e := c.End; e != nil {
		status = fmt.Sprintf("exit %d", e.ExitCode)
		if e.Signal != "" {
			status += " (" + clean(e.Signal) + ")"
		}
		status += "  " + ms(e.DurationMS)
	}
	fmt.Fprintf(w, "    %s  %s", status, diffstat(c.Diff))
	if c.Denied > 0 {
		fmt.Fprintf(w, "  %d denied", c.Denied)
	}
	if c.Alerted > 0 {
		fmt.Fprintf(w, "  %s", strings.ToUpper(plural(c.Alerted, "alert")))
	}
	fmt.Fprintln(w)
	if d := c.Diff; d != nil {
		for i, f := range d.Changes {
			writeChange(w, f, c.Later(i))
		}
	}
	for _, n := range c.Events {
		writeNote(w, n)
	}
	if opts.Diff && c.Diff != nil && c.Diff.Patch != "" {
		writePatch(w, c.Diff)
	}
}

func writeChange(w io.Writer, f FileChange, later *laterView) {
	name := clean(f.Path)
	if f.OldPath != "" {
		name = clean(f.OldPath) + " -> " + name
	}
	detail := ""
	switch {
	case f.Kind == "text" && (f.Added > 0 || f.Deleted > 0):
		detail = fmt.Sprintf(" +%d -%d", f.Added, f.Deleted)
	case f.Kind != "text":
		detail = fmt.Sprintf(" (%s, %d bytes)", f.Kind, max(f.NewSize, f.OldSize))
	}
	if f.OldMode != "" && f.NewMode != "" && f.OldMode != f.NewMode {
		detail += fmt.Sprintf(" mode %s -> %s", f.OldMode, f.NewMode)
	}
	if later != nil {
		detail += "  [runs later: " + later.Category.String() + "]"
	}
	fmt.Fprintf(w, "    %s %s%s\n", opLetter(f.Op), name, detail)
}

// writeLater lists the runs-later files before the commands, each with its category,
// why it is flagged and the command that changed it.
func writeLater(w io.Writer, v *view) {
	if len(v.Later) == 0 {
		return
	}
	fmt.Fprintf(w, "\nRUNS LATER, review first: %s to files that build or CI tooling runs outside the sandbox\n",
		plural(len(v.Later), "change"))
	for _, l := range v.Later {
		name := clean(l.Path)
		if l.OldPath != "" {
			name = clean(l.OldPath) + " -> " + name
		}
		if l.Files > 0 {
			name += fmt.Sprintf(" (%s)", plural(l.Files, "file"))
		}
		by := "between commands"
		if l.Cmd != "" {
			by = "by [" + clean(l.Cmd) + "]"
		}
		fmt.Fprintf(w, "    %s %s  %s: %s  (%s)\n", opLetter(l.Op), name, l.Category, clean(l.Reason), by)
	}
}

func writeNote(w io.Writer, n noteView) {
	fmt.Fprintf(w, "    %-6s %s", n.Verb, clean(n.What))
	if n.Why != "" {
		fmt.Fprintf(w, "  (%s)", clean(n.Why))
	}
	fmt.Fprintln(w)
}

func writePatch(w io.Writer, d *FSDiff) {
	for line := range strings.Lines(d.Patch) {
		fmt.Fprintf(w, "      %s\n", clean(strings.TrimSuffix(line, "\n")))
	}
	if d.PatchTruncated {
		fmt.Fprintf(w, "      ... patch cut at %d of %d bytes; the whole patch is in %s\n",
			len(d.Patch), d.PatchBytes, clean(d.PatchFile))
	}
}

func writeEnd(w io.Writer, v *view) {
	if v.End == nil {
		fmt.Fprintf(w, "\nUNSEALED: the log has no run.end (cordon stopped before the run finished, or the log was truncated)\n")
		return
	}
	e := v.End
	fmt.Fprintf(w, "\nend %s  exit %d (%s)  after %s, %d command(s)", v.Ended.UTC().Format(timeLayout),
		e.ExitCode, clean(e.Reason), v.Ended.Sub(v.Started).Round(time.Millisecond), e.Commands)
	if e.Detail != "" {
		fmt.Fprintf(w, ": %s", clean(e.Detail))
	}
	if e.Dropped > 0 {
		fmt.Fprintf(w, "; %d late event(s) dropped", e.Dropped)
	}
	fmt.Fprintln(w)
}

// writeStaged says, after the end, what became of a staged run's changes: the stage
// lines, then the paths still pending.
func writeStaged(w io.Writer, v *view) {
	sv := v.Staged()
	if sv == nil {
		return
	}
	fmt.Fprintf(w, "\nstaged: %s pending\n", plural(sv.Pending, "change"))
	for _, n := range sv.Lines {
		writeNote(w, n)
	}
	shown := 0
	for _, p := range sv.Paths {
		if p.Status != stagedPending {
			continue
		}
		if shown == maxPendingShown {
			fmt.Fprintf(w, "    … (cordon audit report --html lists them all)\n")
			break
		}
		fmt.Fprintf(w, "    %s %s  pending\n", opLetter(p.Op), clean(p.Path))
		shown++
	}
}

// maxPendingShown bounds the pending paths the timeline lists.
const maxPendingShown = 20
