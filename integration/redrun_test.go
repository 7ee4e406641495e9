package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/internal/testutil"
)

// TestRedRunEarlyChangesNotInBaseline: a command that changes the workspace the
// instant it starts, in a workspace large enough that its baseline takes a while, has
// every change in its diff: no byte of it ran while the baseline was being taken.
func TestRedRunEarlyChangesNotInBaseline(t *testing.T) {
	w := newWorld(t)
	for i := range 40 {
		for j := range 50 {
			mustWrite(t, filepath.Join(w.ws, fmt.Sprintf("d%02d/f%02d.txt", i, j)), "old\n")
		}
	}
	for round := range 3 {
		// Touch a file in the first, a middle and the last directory, whatever the
		// walk's order: one of them is read late.
		victim := fmt.Sprintf("d%02d/f%02d.txt", 20, round)
		script := fmt.Sprintf("echo new%d > d00/f00.txt; echo new%d > d39/f49.txt; rm %s; echo x > made%d",
			round, round, victim, round)
		if r := w.sh(script); r.code != 0 {
			t.Fatalf("round %d: %v", round, r)
		}
		types, diff := runEvents(t, w)
		if diff == nil {
			t.Fatalf("round %d: no fs.diff in %v", round, types)
		}
		got := map[string]string{}
		for _, c := range diff.Changes {
			got[c.Path] = c.Op
		}
		want := map[string]string{"d00/f00.txt": "modified", "d39/f49.txt": "modified", victim: "deleted", fmt.Sprintf("made%d", round): "added"}
		for p, op := range want {
			if got[p] != op {
				t.Errorf("round %d: %s is %q in the diff, want %q (a change hidden in the baseline); diff: %v", round, p, got[p], op, got)
			}
		}
	}
}

// TestRedRunEarlyMonitorRequiredFails: with monitor.mode required and a monitor that
// cannot attach (its bpffs root is not a bpffs), the command never runs, no cmd.start
// is logged, and nothing is left running.
func TestRedRunEarlyMonitorRequiredFails(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	notBPF := t.TempDir()
	w.env = append(w.env, paths.BPFRootEnv+"="+notBPF)
	w.contract("version: 1\nmonitor: {mode: required}\n")
	marker := filepath.Join(w.ws, "ran")
	r := w.sh("touch " + marker + "; exec sleep 1234.25")
	if r.code == 0 {
		t.Fatalf("a run whose required monitor cannot attach succeeded: %v", r)
	}
	t.Logf("refused: %s", strings.TrimSpace(r.stderr))
	assertContains(t, "the reason", r.stderr, "bpffs")
	assertAbsent(t, marker)
	if p := processesRunning("sleep 1234.25"); len(p) > 0 {
		t.Errorf("left running: %v", p)
	}
	types, _ := runEvents(t, w)
	for _, typ := range types {
		if typ == "cmd.start" {
			t.Errorf("cmd.start logged for a command that must not run: %v", types)
		}
	}
	if len(types) == 0 || types[len(types)-1] != "run.end" {
		t.Errorf("log not sealed: %v", types)
	}
	if w2 := dirEntries(notBPF); len(w2) != 0 {
		t.Errorf("the failed monitor left %v in %s", w2, notBPF)
	}
}

func dirEntries(dir string) []string {
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}
