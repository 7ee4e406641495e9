package integration

import (
	"fmt"
	"path/filepath"
	"testing"
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
