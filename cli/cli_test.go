package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/cordonhq/cordon/cli/execcli"
	"github.com/cordonhq/cordon/internal/errdefs"
)

// run runs cordon in-process and returns its output and exit status.
func run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	err := Run(context.Background(), IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb}, args)
	if msg := errdefs.Message(err); msg != "" {
		errb.WriteString("cordon: " + msg + "\n")
	}
	return out.String(), errb.String(), errdefs.ExitCode(err)
}

// walk calls fn for every command of the whole tree that a person may run.
func walk(c *cobra.Command, fn func(*cobra.Command)) {
	if c.Hidden || c.Name() == "help" {
		return
	}
	fn(c)
	for _, s := range c.Commands() {
		walk(s, fn)
	}
}

// TestEveryCommandHasHelp: every command says what it does, has examples, and
// --help prints its usage line to stderr and exits 0.
func TestEveryCommandHasHelp(t *testing.T) {
	root := newRoot(IO{}, "")
	root.InitDefaultCompletionCmd()
	walk(root, func(c *cobra.Command) {
		path := c.CommandPath()
		if c.Short == "" {
			t.Errorf("%s: no Short", path)
		}
		if c.Example == "" && !strings.HasPrefix(path, "cordon completion") {
			t.Errorf("%s: no Example", path)
		}
		args := append(strings.Fields(path)[1:], "--help")
		out, errOut, code := run(t, args...)
		if code != 0 || out != "" || !strings.Contains(errOut, "Usage: "+useLine(c)) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
		if c.Example != "" && !strings.Contains(errOut, "\nExamples:\n") {
			t.Errorf("%v: no Examples section:\n%s", args, errOut)
		}
	})
}

// TestJSONEverywhere: every command whose output a tool may read has --json.
func TestJSONEverywhere(t *testing.T) {
	want := []string{"check", "explain", "backends", "doctor", "diff", "exec", "audit ls", "audit show",
		"audit verify", "session ls", "session sweep", "gate ls", "gate show"}
	root := newRoot(IO{}, "")
	for _, path := range want {
		c, _, err := root.Find(strings.Fields(path))
		if err != nil || c.CommandPath() != "cordon "+path {
			t.Errorf("%s: not found (%v)", path, err)
			continue
		}
		f := c.LocalFlags().Lookup("json")
		if f == nil || !strings.Contains(f.Usage, "schema") {
			t.Errorf("cordon %s: want --json whose help names its schema, got %+v", path, f)
		}
	}
}

// TestUsageErrors: what cobra refuses (an unknown flag or command, a flag without its
// value or with a bad one) and what a command refuses (missing or extra arguments)
// exit 2 with one message that says where to look; help exits 0.
func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		code int
		msg  string // in stderr
	}{
		{nil, 2, "Usage: cordon COMMAND"},
		{[]string{"--help"}, 0, "Usage: cordon COMMAND"},
		{[]string{"help"}, 0, "Usage: cordon COMMAND"},
		{[]string{"help", "run"}, 0, "Usage: cordon run"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"chek"}, 2, "did you mean check?"},
		{[]string{"check", "--nope"}, 2, "check: unknown flag: --nope; see cordon check --help"},
		{[]string{"check", "extra"}, 2, "check: unexpected arguments extra"},
		{[]string{"check", "-c"}, 2, "flag needs an argument"},
		{[]string{"run"}, 2, "run: no command given"},
		{[]string{"run", "--timeout", "soon", "--", "true"}, 2, `invalid argument "soon" for "--timeout"`},
		{[]string{"run", "--timeout", "-1s", "--", "true"}, 2, "--timeout must be positive"},
		{[]string{"run", "--backend", "nosuch", "--", "true"}, 2, `unknown backend "nosuch"`},
		{[]string{"session", "start", "--backend", "dokker"}, 2, `unknown backend "dokker"`},
		{[]string{"explain", "--backend", "x"}, 2, `unknown backend "x"`},
		{[]string{"exec"}, 2, "exec: give a SESSION and a command"},
		{[]string{"exec", "ID"}, 2, "exec: give a SESSION and a command"},
		{[]string{"exec", "ID", "--nope", "--", "true"}, 2, "exec: unknown flag: --nope"},
		{[]string{"exec", "ID", "--help"}, 0, "Usage: cordon exec"},
		{[]string{"session"}, 2, "Usage: cordon session COMMAND"},
		{[]string{"session", "frob"}, 2, `session: unknown subcommand "frob" (checkpoint, ls, rollback, start, stop, sweep)`},
		{[]string{"session", "stop"}, 2, "session stop: give one SESSION"},
		{[]string{"session", "start", "x"}, 2, "session start: unexpected arguments x"},
		{[]string{"audit"}, 2, "Usage: cordon audit COMMAND"},
		{[]string{"audit", "show"}, 2, `audit show: want one RUN id or "last"`},
		{[]string{"audit", "verify", "a", "b"}, 2, `audit verify: want one RUN id or "last"`},
		{[]string{"audit", "prune"}, 2, "audit prune: give --older-than D"},
		{[]string{"audit", "prune", "--keep", "x"}, 2, `invalid argument "x" for "--keep"`},
		{[]string{"diff", "a"}, 2, "diff: want two contracts"},
		{[]string{"gate"}, 2, "Usage: cordon gate COMMAND"},
		{[]string{"gate", "show"}, 2, "gate show: want one ID"},
		{[]string{"gate", "ls", "x"}, 2, "gate ls: takes no arguments"},
		{[]string{"token"}, 2, "Usage: cordon token COMMAND"},
		{[]string{"token", "verify"}, 2, "token verify: want one TOKEN or -"},
		{[]string{"version", "x"}, 2, "version: unexpected arguments x"},
		{[]string{"doctor", "x"}, 2, "doctor: no arguments expected"},
		{[]string{"internal"}, 2, "internal: for cordon's own use only"},
		{[]string{"internal", "man"}, 2, "internal man: want one DIR"},
		{[]string{"completion", "tcsh"}, 2, ""},
	}
	for _, tt := range tests {
		_, stderr, code := run(t, tt.args...)
		if code != tt.code || !strings.Contains(stderr, tt.msg) {
			t.Errorf("cordon %q: exit %d, stderr %q; want %d and %q", tt.args, code, stderr, tt.code, tt.msg)
		}
		if code == 2 && strings.Count(stderr, "cordon: ") > 1 {
			t.Errorf("cordon %q: the error is printed more than once: %q", tt.args, stderr)
		}
	}
}

// TestRunFlagsEndAtTheCommand: run's flags end at CMD, with or without "--": the
// command's own flags (-v, --json) are its own, as docker run does it.
func TestRunFlagsEndAtTheCommand(t *testing.T) {
	tests := []struct {
		args    []string
		argv    []string
		file    string
		verbose bool
	}{
		{[]string{"-c", "f.yaml", "--", "make", "-v"}, []string{"make", "-v"}, "f.yaml", false},
		{[]string{"make", "-v"}, []string{"make", "-v"}, "", false},
		{[]string{"-v", "make", "-c", "x"}, []string{"make", "-c", "x"}, "", true},
		{[]string{"--contract=f.yaml", "-v", "--", "--json"}, []string{"--json"}, "f.yaml", true},
	}
	for _, tt := range tests {
		var got []string
		c := newRunCmd(IO{})
		c.RunE = func(_ *cobra.Command, args []string) error { got = args; return nil }
		c.SetArgs(tt.args)
		if err := c.Execute(); err != nil {
			t.Fatal(err)
		}
		file, _ := c.Flags().GetString("contract")
		v, _ := c.Flags().GetBool("verbose")
		if !slices.Equal(got, tt.argv) || file != tt.file || v != tt.verbose {
			t.Errorf("run %q: argv %q, -c %q, -v %v; want %q, %q, %v", tt.args, got, file, v, tt.argv, tt.file, tt.verbose)
		}
	}
}

// TestManPages: one page per command, from the help text, that man(1) can read.
func TestManPages(t *testing.T) {
	dir := t.TempDir()
	if _, stderr, code := run(t, "internal", "man", dir); code != 0 {
		t.Fatalf("internal man: %d %s", code, stderr)
	}
	for _, name := range []string{"cordon", "cordon-run", "cordon-exec", "cordon-audit-show", "cordon-gate-deny", "cordon-completion-bash"} {
		b, err := os.ReadFile(filepath.Join(dir, name+".1"))
		if err != nil {
			t.Errorf("%s.1: %v", name, err)
			continue
		}
		page := string(b)
		for _, want := range []string{".TH \"" + strings.ToUpper(name) + "\" 1", ".SH NAME\n" + name + ` \- `, ".SH SYNOPSIS", ".SH DESCRIPTION"} {
			if !strings.Contains(page, want) {
				t.Errorf("%s.1: no %q", name, want)
			}
		}
	}
	b, _ := os.ReadFile(filepath.Join(dir, "cordon-run.1"))
	for _, want := range []string{".SH OPTIONS\n", `\fB\-c\fR, \fB\-\-contract\fR \fIFILE\fR`, ".SH EXAMPLES", `cordon run \-\- make test`, `\fBcordon\fR(1)`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("cordon-run.1: no %q in\n%s", want, b)
		}
	}
	if ents, _ := os.ReadDir(dir); slices.ContainsFunc(ents, func(e os.DirEntry) bool {
		return strings.Contains(e.Name(), "internal") || strings.Contains(e.Name(), "help")
	}) {
		t.Errorf("man pages of hidden commands: %v", ents)
	}
}

func TestRoff(t *testing.T) {
	for in, want := range map[string]string{
		`a\b`:             `a\eb`,
		"--json":          `\-\-json`,
		".TH evil\n'x":    "\\&.TH evil\n\\&'x",
		"plain words, ok": "plain words, ok",
	} {
		if got := roff(in); got != want {
			t.Errorf("roff(%q) = %q; want %q", in, got, want)
		}
	}
}

// TestExecFlagsFromOneTable: cordon exec's help, man page and completion show every
// flag cli/execcli parses (one table), and completion offers files for a flag's
// value and for the command.
func TestExecFlagsFromOneTable(t *testing.T) {
	_, help, code := run(t, "exec", "--help")
	if code != 0 {
		t.Fatalf("exec --help: exit %d", code)
	}
	dir := t.TempDir()
	if _, stderr, code := run(t, "internal", "man", dir); code != 0 {
		t.Fatalf("internal man: %d %s", code, stderr)
	}
	man, err := os.ReadFile(filepath.Join(dir, "cordon-exec.1"))
	if err != nil {
		t.Fatal(err)
	}
	names, _, _ := run(t, "__complete", "exec", "--")
	for _, f := range execcli.Flags {
		if !strings.Contains(help, "--"+f.Name) || !strings.Contains(names, "--"+f.Name+"\t") {
			t.Errorf("--%s: not in exec --help or in its completion:\n%s\n%s", f.Name, help, names)
		}
		if f.Name != "help" && !strings.Contains(string(man), roff("--"+f.Name)) {
			t.Errorf("--%s: not in cordon-exec.1", f.Name)
		}
	}
	for _, args := range [][]string{{"exec", "--dir", ""}, {"exec", "ID", ""}} {
		if out, _, _ := run(t, append([]string{"__complete"}, args...)...); !strings.HasSuffix(strings.TrimSpace(out), ":0") {
			t.Errorf("__complete %q: want files (directive 0): %q", args, out)
		}
	}
}

// TestVersionFlag: `cordon --version` prints what `cordon version` prints, on stdout,
// and exits 0, as docker --version and kubectl --version do.
func TestVersionFlag(t *testing.T) {
	want, _, code := run(t, "version")
	if code != 0 || !strings.HasPrefix(want, "cordon ") {
		t.Fatalf("cordon version: exit %d, stdout %q", code, want)
	}
	for _, flag := range []string{"--version", "-v"} {
		got, stderr, code := run(t, flag)
		if code != 0 || got != want {
			t.Errorf("cordon %s: exit %d, stdout %q, stderr %q; want 0 and %q", flag, code, got, stderr, want)
		}
	}
}
