package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/audit"
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
	for range 2 {
		if r := w.sh("true"); r.code != 0 {
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
	r := w.cordon("", "audit", "prune", "--keep", "1")
	if r.code != 0 || !strings.Contains(r.stdout, "removed "+runs[1].ID) || !strings.Contains(r.stdout, "kept "+runs[2].ID+": unsealed") {
		t.Fatalf("prune --keep 1: want %s removed, the live %s kept: %v", runs[1].ID, runs[2].ID, r)
	}
	after, _ := audit.List(w.auditRoot())
	if len(after) != 2 || after[0].ID != runs[0].ID || after[1].ID != runs[2].ID {
		t.Errorf("after prune: %+v", after)
	}
	log, err := os.ReadFile(filepath.Join(w.auditRoot(), audit.PruneFile))
	if err != nil || strings.Count(string(log), "\n") != 1 || !strings.Contains(string(log), `"run":"`+runs[1].ID+`"`) {
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
