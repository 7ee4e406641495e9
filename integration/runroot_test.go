package integration

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRunRootOutOfTheSandboxReach: gc trusts what a run root holds (owner records naming
// placeholders to remove and cgroups to kill), so a run refuses a run root its sandbox
// could write — inside the workspace, or relative (the workspace is where cordon runs) —
// before it starts anything, and nothing is left in it.
func TestRunRootOutOfTheSandboxReach(t *testing.T) {
	w := newWorld(t)
	inWS := filepath.Join(w.ws, ".c", "runs")
	if err := os.MkdirAll(inWS, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, root := range []string{inWS, ".c/runs"} {
		w.useRunRoot(root)
		r := w.cordon("", "run", "--", "sh", "-c", "echo ran > ran.txt")
		if r.code != 125 {
			t.Fatalf("run root %s: want 125, got %v", root, r)
		}
		want := "which the sandbox may write"
		if !filepath.IsAbs(root) {
			want = "not an absolute path"
		}
		assertContains(t, "stderr", r.stderr, want)
		assertAbsent(t, filepath.Join(w.ws, "ran.txt"))
		if entries, _ := os.ReadDir(inWS); len(entries) != 0 {
			t.Errorf("run root %s: the refused run left %d entries in it", root, len(entries))
		}
	}
}
