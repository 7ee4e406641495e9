package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStagedChangeSetBounded (bwrap): a staged run whose sandbox makes more entries
// than limits.diff.entries is refused at its end (125, naming the bound) instead of
// being read whole into cordon's memory, here and at apply; nothing of it is left
// staged, the workspace is untouched, and a change set within the bound still stages.
func TestStagedChangeSetBounded(t *testing.T) {
	w := newStageWorld(t)
	w.contract("version: 1\nlimits: {diff: {entries: 100}}\n")
	r := w.cordon("", "run", "--stage", "--", "sh", "-c", `mkdir big; i=0; while [ $i -lt 500 ]; do : > big/f$i; i=$((i+1)); done`)
	if r.code != 125 || !strings.Contains(r.stderr, "more than 100 (limits.diff.entries)") {
		t.Fatalf("a change set of 501 entries past entries: 100: want 125 naming the bound, got %v", r)
	}
	assertAbsent(t, filepath.Join(w.ws, "big"))
	if r := w.cordon("", "apply", "last"); r.code == 0 {
		t.Fatalf("apply of a refused change set succeeded: %v", r)
	}
	if entries, _ := os.ReadDir(w.audit); len(entries) != 1 {
		t.Errorf("the audit root holds %d entries, want the run's log alone", len(entries))
	} else if _, err := os.Stat(filepath.Join(w.audit, entries[0].Name(), "events.jsonl")); err != nil {
		t.Errorf("the refused run's log: %v", err)
	}
	// Within the bound the same contract stages and applies.
	id := w.stage(`mkdir small; i=0; while [ $i -lt 50 ]; do : > small/f$i; i=$((i+1)); done`)
	if r := w.cordon("", "apply", id); r.code != 0 {
		t.Fatalf("apply within the bound: %v", r)
	}
	if entries, _ := os.ReadDir(filepath.Join(w.ws, "small")); len(entries) != 50 {
		t.Errorf("apply landed %d files of 50", len(entries))
	}
}
