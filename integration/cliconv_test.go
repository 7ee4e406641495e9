package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The command line's conventions, through the real binary (issue 15): flags before or
// after the positional arguments, "--", run and exec whose flags end at the command,
// --json documents with their "schema", and exit codes.

// jsonOf decodes r's stdout as one JSON object and checks its schema field.
func jsonOf(t *testing.T, what string, r result, schema string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatalf("%s: not one JSON object (%v): %v", what, err, r)
	}
	if m["schema"] != schema {
		t.Errorf("%s: schema %v; want %q", what, m["schema"], schema)
	}
	return m
}

func TestCLIFlagOrderAndJSON(t *testing.T) {
	w := newWorld(t)
	// run: flags end at the command, with or without "--".
	if r := w.cordon("", "run", "-c", w.contract("version: 1\n"), "--", "sh", "-c", `echo "$0"`, "-v"); r.code != 0 || r.stdout != "-v\n" {
		t.Errorf("run -c F -- CMD -v: -v is the command's: %v", r)
	}
	if r := w.cordon("", "run", "sh", "-c", `echo "$0 $1"; echo x > ran.txt`, "-v", "--json"); r.code != 0 || r.stdout != "-v --json\n" {
		t.Errorf("run CMD -v --json: both are the command's: %v", r)
	}
	// audit: flags after the run (the README writes them so), or before.
	root := w.auditRoot()
	for _, args := range [][]string{
		{"audit", "show", "last", "--diff"},
		{"audit", "show", "--diff", "last"},
		{"audit", "verify", "last", "--audit-dir", root},
		{"audit", "verify", "--audit-dir", root, "last"},
		{"audit", "report", "last", "-o", filepath.Join(w.home, "r.html")},
		{"audit", "report", "--output=" + filepath.Join(w.home, "r2.html"), "last"},
		{"audit", "export", "last", "--format", "jsonl", "-o", filepath.Join(w.home, "e.jsonl")},
	} {
		if r := w.cordon("", args...); r.code != 0 {
			t.Errorf("%q: %v", args, r)
		}
	}
	if r := w.cordon("", "audit", "show", "last", "--diff"); !strings.Contains(r.stdout, "+x") {
		t.Errorf("audit show last --diff: no patch: %v", r)
	}
	ls := jsonOf(t, "audit ls --json", w.cordon("", "audit", "ls", "--json"), "cordon.audit.ls/v1")
	runs, _ := ls["runs"].([]any)
	if len(runs) != 2 || runs[0].(map[string]any)["workspace"] != w.ws || runs[0].(map[string]any)["sealed"] != true {
		t.Errorf("audit ls --json: want 2 runs of %s, newest sealed: %v", w.ws, ls)
	}
	if r := w.cordon("", "audit", "ls"); !strings.Contains(r.stdout, "WORKSPACE") || !strings.Contains(r.stdout, w.ws) {
		t.Errorf("audit ls: no WORKSPACE column: %v", r)
	}
	v := jsonOf(t, "audit verify --json", w.cordon("", "audit", "verify", "last", "--json"), "cordon.audit.verify/v1")
	if v["ok"] != true || v["problem"] != nil {
		t.Errorf("audit verify --json: %v", v)
	}
	show := jsonOf(t, "audit show --json", w.cordon("", "audit", "show", "last", "--json"), "cordon.audit.show/v1")
	if show["show_version"] != 1.0 {
		t.Errorf("audit show --json keeps show_version: %v", show["show_version"])
	}
	// check, explain, backends, diff: --json before or after.
	f := w.contract("version: 1\n")
	for _, args := range [][]string{{"check", "-c", f, "--json"}, {"check", "--json", "-c", f}} {
		if c := jsonOf(t, "check --json", w.cordon("", args...), "cordon.check/v1"); c["valid"] != true || c["contract"] != f {
			t.Errorf("%q: %v", args, c)
		}
	}
	bad := filepath.Join(w.home, "bad.yaml")
	mustWrite(t, bad, "version: 1\nbogus: 1\n")
	r := w.cordon("", "check", "--json", "-c", bad)
	if c := jsonOf(t, "check --json of an invalid contract", r, "cordon.check/v1"); r.code != 1 || c["valid"] != false || len(c["problems"].([]any)) != 1 {
		t.Errorf("check --json of an invalid contract: exit 1, one problem: %v", r)
	}
	if e := jsonOf(t, "explain --json", w.cordon("", "explain", "--json"), "cordon.explain/v1"); e["explain_version"] != 1.0 {
		t.Errorf("explain --json keeps explain_version: %v", e["explain_version"])
	}
	b := jsonOf(t, "backends --json", w.cordon("", "backends", "--json"), "cordon.backends/v1")
	if bs, _ := b["backends"].([]any); len(bs) == 0 || bs[0].(map[string]any)["name"] != "bwrap" {
		t.Errorf("backends --json: %v", b)
	}
	for _, args := range [][]string{{"diff", f, f, "--json"}, {"diff", "--json", f, f}, {"diff", f, "--json", f}} {
		if d := jsonOf(t, "diff --json", w.cordon("", args...), "cordon.diff/v1"); d["wider"] != false {
			t.Errorf("%q: %v", args, d)
		}
	}
	if g := jsonOf(t, "gate ls --json", w.cordon("", "gate", "ls", "--json"), "cordon.gate.ls/v1"); g["gate_ls_version"] != 1.0 {
		t.Errorf("gate ls --json: %v", g)
	}
	if r := w.cordon("", "gate", "show", "nope", "--json"); r.code != 1 {
		t.Errorf("gate show of an unknown request: want 1: %v", r)
	}
}

func TestCLISessionFlagOrder(t *testing.T) {
	w := newWorld(t)
	id := w.startSession("--gates", "deny", "-c", w.contract("version: 1\n"))
	for _, args := range [][]string{
		{"exec", id, "--json", "--", "echo", "hi"},
		{"exec", "--json", id, "--", "echo", "hi"},
		{"exec", "--json", id, "echo", "hi"},
		{"exec", id, "--timeout", "30s", "--json", "echo", "hi"},
	} {
		e := jsonOf(t, strings.Join(args, " "), w.cordon("", args...), "cordon.exec/v1")
		if e["stdout"] != "hi\n" || e["exit_code"] != 0.0 || e["v"] != 1.0 {
			t.Errorf("%q: %v", args, e)
		}
	}
	// exec's flags end at the command: -v and --json are sh's.
	if r := w.cordon("", "exec", id, "sh", "-c", `echo "$0 $1"`, "-v", "--json"); r.code != 0 || r.stdout != "-v --json\n" {
		t.Errorf("exec ID CMD -v --json: %v", r)
	}
	if r := w.cordon("", "exec", id, "--", "sh", "-c", "exit 3"); r.code != 3 {
		t.Errorf("exec: the command's status: %v", r)
	}
	if r := w.cordon("", "exec", id, "--nope", "--", "true"); r.code != 2 {
		t.Errorf("exec with an unknown flag: want 2: %v", r)
	}
	if r := w.cordon("", "exec", "20260101T000000Z-000000", "--", "true"); r.code != 125 {
		t.Errorf("exec in no session: want 125: %v", r)
	}
	ls := jsonOf(t, "session ls --json", w.cordon("", "session", "ls", "--json"), "cordon.session.ls/v1")
	if ss, _ := ls["sessions"].([]any); len(ss) != 1 || ss[0].(map[string]any)["id"] != id || ss[0].(map[string]any)["alive"] != true {
		t.Errorf("session ls --json: %v", ls)
	}
	jsonOf(t, "session sweep ID --json", w.cordon("", "session", "sweep", id, "--json"), "cordon.session.sweep/v1")
}

// TestCLICompletionAndMan: cobra's completion scripts, and the man pages that make
// install installs.
func TestCLICompletionAndMan(t *testing.T) {
	w := newWorld(t)
	for shell, want := range map[string]string{"bash": "# bash completion V2 for cordon", "zsh": "#compdef cordon", "fish": "# fish completion for cordon"} {
		if r := w.cordon("", "completion", shell); r.code != 0 || !strings.HasPrefix(r.stdout, want) {
			t.Errorf("completion %s: %.200v", shell, r)
		}
	}
	if r := w.cordon("", "__complete", "audit", "show", ""); r.code != 0 || !strings.HasPrefix(r.stdout, "last\t") {
		t.Errorf("completing a RUN: %v", r)
	}
	dir := filepath.Join(w.home, "man1")
	if r := w.cordon("", "internal", "man", dir); r.code != 0 {
		t.Fatalf("internal man: %v", r)
	}
	pages, _ := filepath.Glob(filepath.Join(dir, "*.1"))
	if len(pages) < 20 {
		t.Errorf("man pages: %d, want one per command: %v", len(pages), pages)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "cordon-audit-show.1")); err != nil || !strings.Contains(string(b), "cordon audit show last \\-\\-diff") {
		t.Errorf("cordon-audit-show.1: %v\n%s", err, b)
	}
}
