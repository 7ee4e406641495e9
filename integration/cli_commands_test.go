package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestCheckExitCodes(t *testing.T) {
	w := newWorld(t)
	if r := w.cordon("", "check"); r.code != 0 || !strings.Contains(r.stdout, "built-in default contract: valid") {
		t.Errorf("built-in default: %v", r)
	}
	w.contract("version: 1\nfilesystem:\n  widen:\n    - {path: ~/.ssh, why: deploy keys for the test}\n")
	r := w.cordon("", "check")
	if r.code != 0 {
		t.Fatalf("a valid contract with a widening: %v", r)
	}
	assertContains(t, "check", r.stdout, "cordon.yaml:4:7: widening: "+w.home+"/.ssh is readable (deploy keys for the test)")
	w.contract("version: 1\nbogus: 1\ncommands: {timeout: 0s}\n")
	r = w.cordon("", "check")
	if r.code != 1 {
		t.Fatalf("invalid: want 1, got %v", r)
	}
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); len(lines) != 2 {
		t.Errorf("want one line per problem (2), got %q", r.stdout)
	}
	if r := w.cordon("", "check", "--nope"); r.code != 2 {
		t.Errorf("usage error: want 2, got %v", r)
	}
	if r := w.cordon("", "check", "-c", "/nonexistent.yaml"); r.code != 1 || !strings.Contains(r.stdout, "no such file") {
		t.Errorf("missing file: %v", r)
	}
}

func TestExplain(t *testing.T) {
	w := newWorld(t)
	r := w.cordon("", "explain", "--json")
	if r.code != 0 {
		t.Fatalf("explain --json: %v", r)
	}
	var out struct {
		Version int `json:"explain_version"`
		Plan    struct {
			Workspace string `json:"workspace"`
			Mounts    []struct {
				Path   string `json:"path"`
				Access string `json:"access"`
			} `json:"mounts"`
			Env []map[string]string `json:"env"`
		} `json:"plan"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("explain --json is not JSON: %v\n%s", err, r.stdout)
	}
	if out.Version != 1 || out.Plan.Workspace != w.ws {
		t.Errorf("explain: %+v", out)
	}
	for _, e := range out.Plan.Env {
		if _, ok := e["value"]; ok {
			t.Errorf("explain must not print environment values: %v", e)
		}
	}
	r = w.cordon("", "explain")
	if !regexp.MustCompile(`(?m)^  rw +` + regexp.QuoteMeta(w.ws) + ` +filesystem\.writable \(default\)$`).MatchString(r.stdout) {
		t.Errorf("explain: the workspace row is missing:\n%s", r.stdout)
	}
	assertContains(t, "explain", r.stdout, w.ws+"/.git")
	assertContains(t, "explain", r.stdout, "Network: none")
}

func TestHelpAndVersion(t *testing.T) {
	w := newWorld(t)
	for _, cmd := range []string{"run", "check", "explain", "backends", "gc", "version"} {
		if r := w.cordon("", cmd, "--help"); r.code != 0 || !strings.Contains(r.stderr, "Usage: cordon "+cmd) {
			t.Errorf("%s --help: %v", cmd, r)
		}
	}
	if r := w.cordon("", "version"); r.code != 0 || !strings.HasPrefix(r.stdout, "cordon ") {
		t.Errorf("version: %v", r)
	}
	if r := w.cordon("", "backends"); r.code != 0 || !regexp.MustCompile(`(?m)^bwrap +available`).MatchString(r.stdout) {
		t.Errorf("backends: %v", r)
	}
	if r := w.cordon("", "frobnicate"); r.code != 2 {
		t.Errorf("unknown command: want 2, got %v", r)
	}
}

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

func TestExitCodesAndStdin(t *testing.T) {
	w := newWorld(t)
	if r := w.sh("exit 42"); r.code != 42 {
		t.Errorf("exit 42: got %v", r)
	}
	if r := w.sh("kill -9 $$"); r.code != 137 {
		t.Errorf("killed by SIGKILL: want 137, got %v", r)
	}
	r := w.cordon("hello from stdin\n", "run", "--", "cat")
	if r.code != 0 || r.stdout != "hello from stdin\n" {
		t.Errorf("stdin passthrough: %v", r)
	}
	r = w.cordon("", "run", "--", "no-such-command-xyz")
	if r.code != 127 {
		t.Errorf("missing command: want 127, got %v", r)
	}
	assertContains(t, "stderr", r.stderr, "cordon: no-such-command-xyz: command not found")
	r = w.cordon("", "run")
	if r.code != 2 {
		t.Errorf("no command: want usage error 2, got %v", r)
	}
}
