package audit

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
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
		writeGap(w, d.Gap)
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
	case f.Kind == "dir":
		detail = " (dir)"
	case f.Kind != "text":
		detail = fmt.Sprintf(" (%s, %d bytes)", f.Kind, max(f.NewSize, f.OldSize))
	}
	if f.OldMode != "" && f.NewMode != "" && f.OldMode != f.NewMode {
		detail += fmt.Sprintf(" mode %s -> %s", f.OldMode, f.NewMode)
	}
	detail += metaDetail(f)
	if later != nil {
		detail += "  [runs later: " + later.Category.String() + "]"
	}
	fmt.Fprintf(w, "    %s %s%s\n", opLetter(f.Op), name, detail)
}

// metaDetail shows what changed of f's metadata: its mtime when it only moved or
// moved back (which steers make), its extended attributes by name (+ added, ~ changed,
// - removed; names are the workload's, cleaned).
func metaDetail(f FileChange) string {
	var s string
	if f.OldMtime != "" && (f.Op == "touched" || movedBack(f.OldMtime, f.NewMtime)) {
		s = " mtime " + clean(f.OldMtime) + " -> " + clean(f.NewMtime)
	}
	if len(f.Xattrs) == 0 {
		return s
	}
	names := make([]string, len(f.Xattrs))
	for i, x := range f.Xattrs {
		names[i] = map[string]string{"added": "+", "deleted": "-"}[x.Op]
		if names[i] == "" {
			names[i] = "~"
		}
		names[i] += strconv.Quote(x.Name)
	}
	return s + " xattrs " + clean(strings.Join(names, " "))
}

// movedBack reports whether the RFC 3339 time now is before was.
func movedBack(was, now string) bool {
	a, err1 := time.Parse(time.RFC3339Nano, was)
	b, err2 := time.Parse(time.RFC3339Nano, now)
	return err1 == nil && err2 == nil && b.Before(a)
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
	switch {
	case d.PatchTruncated && d.PatchFile == "":
		fmt.Fprintf(w, "      ... patch cut at %d of %d bytes; the rest was not stored (limits.diff.patch_run)\n",
			len(d.Patch), d.PatchBytes)
	case d.PatchTruncated:
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

// writeGap says what a bounded diff left out, when it did: the diff above it is not
// the whole change.
func writeGap(w io.Writer, g *DiffGap) {
	if g == nil {
		return
	}
	var parts []string
	add := func(n int, format string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf(format, n))
		}
	}
	add(g.ChangesOmitted, "%d more change(s) not itemized")
	add(g.Unlisted, "%d entries not recorded (limits.diff.entries)")
	add(g.IncompleteDirs, "%d director(ies) not fully recorded")
	add(g.NotCompared, "%d path(s) there not compared")
	add(g.NotHashed, "%d changed file(s) not hashed (limits.diff.hash_file, hash_total)")
	add(g.PatchOmitted, "%d patch(es) left out (limits.diff.patch)")
	if g.NoSpace {
		add(g.PatchNotStored, "%d bytes of patch not stored (no room on the disk for the patch file)")
	} else {
		add(g.PatchNotStored, "%d bytes of patch not stored (limits.diff.patch_run)")
	}
	add(g.ProblemsOmitted, "%d problem(s) not itemized")
	add(g.QuarantinedOmitted, "%d more path(s) quarantined, not named")
	if g.TimedOut {
		parts = append(parts, "stopped at its deadline (limits.diff.time)")
	}
	fmt.Fprintf(w, "    GAP    diff incomplete: %s\n", strings.Join(parts, "; "))
	for _, p := range g.IncompletePaths {
		fmt.Fprintf(w, "    GAP    not fully recorded: %s\n", clean(p))
	}
	for _, p := range g.NotHashedPaths {
		fmt.Fprintf(w, "    GAP    not hashed: %s\n", clean(p))
	}
}
