package integration

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
)

// repoRoot is the repository's top directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// docWorld is a world whose shell finds the cordon under test first on PATH, with an
// audit root of its own ($XDG_STATE_HOME) beside its run root, and $CORDON_SRC naming
// the cordon checkout (docs/ci.md runs the action's script from it).
func docWorld(t *testing.T) *world {
	t.Helper()
	w := newWorld(t)
	bin := filepath.Dir(testutil.Cordon(t))
	for i, e := range w.env {
		if strings.HasPrefix(e, "PATH=") {
			w.env[i] = "PATH=" + bin + ":" + strings.TrimPrefix(e, "PATH=")
		}
	}
	// RUNNER_TEMP: docs/ci.md runs the GitHub action's script, which keeps its audit
	// root there (the runner's, emptied after each job; /tmp without it).
	w.env = append(w.env, "XDG_STATE_HOME="+shortTempDir(t), "TERM=dumb", "CORDON_SRC="+repoRoot(t), "RUNNER_TEMP="+shortTempDir(t))
	t.Cleanup(func() { stopSessions(w) })
	return w
}

// stopSessions stops what a failed block left running in w's run root.
func stopSessions(w *world) {
	r := w.cordon("", "session", "ls")
	for _, line := range strings.Split(r.stdout, "\n") {
		if id, _, _ := strings.Cut(line, "\t"); id != "" && strings.Contains(line, "running") {
			w.cordon("", "session", "stop", id)
		}
	}
}

// bash runs script in w's workspace with `set -e -o pipefail`.
func (w *world) bash(script string) result {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", script)
	cmd.Dir, cmd.Env = w.ws, w.env
	return runResult(w.t, cmd, "bash")
}

// TestDocsRun runs every shell example of README.md and docs/*.md against the real
// binaries (the convention is in docs_convention_test.go): a doc that lies fails here.
func TestDocsRun(t *testing.T) {
	root := repoRoot(t)
	files, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files = append([]string{filepath.Join(root, "README.md")}, files...)
	ran := 0
	for _, f := range files {
		rel, _ := filepath.Rel(root, f)
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := parseDocBlocks(rel, string(data))
		if err != nil {
			t.Errorf("%v", err)
		}
		if len(blocks) == 0 {
			continue
		}
		t.Run(rel, func(t *testing.T) {
			w := docWorld(t) // one world per file: its blocks run in order in it
			for _, b := range blocks {
				if b.skip != "" {
					t.Logf("%s: not run: %s", b.name(), b.skip)
					continue
				}
				ran++
				runDocBlock(t, w, b)
			}
		})
	}
	if ran == 0 {
		t.Fatal("no shell block ran: the docs have none, or the parser lost them")
	}
}

func runDocBlock(t *testing.T, w *world, b docBlock) {
	t.Helper()
	if b.setup != "" {
		if r := w.bash(b.setup); r.code != 0 {
			t.Errorf("%s: the doc-test setup failed: %v", b.name(), r)
			return
		}
	}
	if r := w.bash(b.script); r.code != b.exit {
		t.Errorf("%s: want exit %d, got %v\nthe block:\n%s", b.name(), b.exit, r, b.script)
	}
}

// exampleDirective is one "# doc-test: WORD ARG" line of an example contract: setup runs
// ARG with sh on the host in the fresh workspace, run runs it in the sandbox under the
// example (`cordon run -- sh -c ARG`, which must exit 0), skip says why it runs nothing.
type exampleDirective struct{ word, arg string }

func exampleDirectives(t *testing.T, name, yaml string) []exampleDirective {
	t.Helper()
	var out []exampleDirective
	for _, l := range strings.Split(yaml, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(l), "# doc-test:")
		if !ok {
			continue
		}
		word, arg, _ := strings.Cut(strings.TrimSpace(rest), " ")
		if (word != "setup" && word != "run" && word != "skip") || strings.TrimSpace(arg) == "" {
			t.Errorf("%s: %q: want # doc-test: setup|run|skip ARG", name, l)
			continue
		}
		out = append(out, exampleDirective{word, strings.TrimSpace(arg)})
	}
	return out
}

// TestExamplesRun: every contract in examples/ passes `cordon check` and `cordon
// explain` (and --json), and does what its comment says it is for (its doc-test: run
// lines), copied into a fresh workspace as cordon.yaml.
func TestExamplesRun(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(repoRoot(t), "examples", "*.yaml"))
	if len(files) == 0 {
		t.Fatal("no examples found")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			w := docWorld(t)
			w.contract(string(data))
			ds := exampleDirectives(t, filepath.Base(f), string(data))
			for _, d := range ds {
				if d.word != "setup" {
					continue
				}
				if r := w.bash(d.arg); r.code != 0 {
					t.Fatalf("setup %q: %v", d.arg, r)
				}
			}
			if r := w.cordon("", "check", "-c", "cordon.yaml"); r.code != 0 {
				t.Fatalf("check: %v", r)
			}
			if r := w.cordon("", "explain"); r.code != 0 || !strings.Contains(r.stdout, w.ws) {
				t.Errorf("explain: %v", r)
			}
			r := w.cordon("", "explain", "--json")
			var plan map[string]any
			if err := json.Unmarshal([]byte(r.stdout), &plan); r.code != 0 || err != nil || plan["explain_version"] == nil {
				t.Errorf("explain --json (%v): %v", err, r)
			}
			runExample(t, w, ds)
		})
	}
}

func runExample(t *testing.T, w *world, ds []exampleDirective) {
	t.Helper()
	runs := 0
	for _, d := range ds {
		switch d.word {
		case "skip":
			t.Logf("not run: %s", d.arg)
			runs++
		case "run":
			runs++
			if r := w.cordon("", "run", "--", "sh", "-c", d.arg); r.code != 0 {
				t.Errorf("run %q: %v", d.arg, r)
			}
		}
	}
	if runs == 0 {
		t.Error("the example has no # doc-test: run (or skip REASON) line: say what it is for, and prove it")
	}
}
