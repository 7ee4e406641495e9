package audit

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"strings"
	"sync"
	"time"
)

//go:embed report.html.tmpl
var reportTemplate string

// reportTmpl is parsed on first use, not at every cordon start.
var reportTmpl = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("report").Funcs(template.FuncMap{
		"clean":    clean,
		"text":     cleanText,
		"argv":     argv,
		"ms":       ms,
		"diffstat": diffstat,
		"op":       opLetter,
		"when":     func(t time.Time) string { return t.UTC().Format(timeLayout) },
		"clock":    func(t time.Time) string { return t.UTC().Format("15:04:05.000") },
		"patch":    patchLines,
		"lower":    strings.ToLower,
		"join":     strings.Join,
	}).Parse(reportTemplate))
})

// HTMLOptions tunes WriteHTML.
type HTMLOptions struct {
	// Verify, when set, is shown in the summary (run Verify first to fill it).
	Verify *Report
}

// reportData is what the template sees.
type reportData struct {
	*view
	Verify   *Report
	Denied   int64
	Attempts int64 // egress attempts: itemized, and those the summaries count
	Elapsed  string
}

// WriteHTML writes a run as one self-contained HTML page: a summary, the timeline of
// commands with their diffstats, network decisions and alerts, each patch in a
// collapsible <details>, an egress table, the alerts and the credential events. It loads
// nothing from elsewhere and runs no script (its Content-Security-Policy forbids both);
// every string from the log is escaped by html/template.
func WriteHTML(w io.Writer, recs []Record, opts HTMLOptions) error {
	v := buildView(recs)
	d := reportData{view: v, Verify: opts.Verify}
	for _, n := range v.Net {
		d.Denied += n.Denied
		d.Attempts += n.Attempts
	}
	if v.End != nil {
		d.Elapsed = v.Ended.Sub(v.Started).Round(time.Millisecond).String()
	}
	if err := reportTmpl().Execute(w, d); err != nil {
		return fmt.Errorf("rendering report: %w", err)
	}
	return nil
}

// patchLine is one line of a patch with the CSS class that colours it.
type patchLine struct {
	Class, Text string
}

// patchLines splits a patch into classed lines: file headers, hunk headers, additions,
// deletions and context.
func patchLines(patch string) []patchLine {
	var out []patchLine
	inHunk := false
	for line := range strings.Lines(patch) {
		line = strings.TrimSuffix(line, "\n")
		class := "meta"
		switch {
		case strings.HasPrefix(line, "diff --git "):
			inHunk = false
		case strings.HasPrefix(line, "@@"):
			inHunk, class = true, "hunk"
		case inHunk && strings.HasPrefix(line, "+"):
			class = "add"
		case inHunk && strings.HasPrefix(line, "-"):
			class = "del"
		case inHunk && strings.HasPrefix(line, " "):
			class = "ctx"
		}
		out = append(out, patchLine{class, clean(line)})
	}
	return out
}
