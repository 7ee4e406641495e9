package integration

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestRTTodayRollbackHalfDone: a staged session's rollback that stops at the bound
// (ErrTooMany) is documented as refused ("a rollback is refused too (exit 125 ...)").
// It is not: Rollback walks the paths in order and stops at the first directory past
// limits.diff.entries, so every path sorted before it is already rolled back. Here
// the workspace holds big/ with more entries than the bound (its own files, not the
// sandbox's); the last command edited a.txt and added big/new. `rollback -1` restores
// a.txt, then stops at big/ with exit 125: the sandbox sees a workspace that is at
// neither the checkpoint nor where it was, and the log's session.rollback line says
// the rollback was made, with a.txt among its paths and no word of the failure.
func TestRTTodayRollbackHalfDone(t *testing.T) {
	w := newStageWorld(t)
	for i := range 150 {
		mustWrite(t, filepath.Join(w.ws, "big", "f"+strconv.Itoa(i)), "x\n")
	}
	w.contract("version: 1\nlimits: {diff: {entries: 100}}\n")
	id := w.startSession("--stage")
	w.exec(id, "echo two > a.txt; : > big/new")
	r := w.cordon("", "session", "rollback", id, "-1")
	if r.code == 0 {
		t.Fatalf("the rollback past the bound succeeded; this test needs it refused: %v", r)
	}
	got := strings.TrimSpace(w.exec(id, "cat a.txt; [ -e big/new ] && echo big/new"))
	if got != "two\nbig/new" {
		t.Errorf("a rollback refused with exit %d (%s) left the workspace half rolled back: the sandbox sees %q, want %q (as before the rollback)",
			r.code, strings.TrimSpace(r.stderr), got, "two\nbig/new")
	}
	log, err := os.ReadFile(filepath.Join(w.audit, id, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(log), "\n") {
		if strings.Contains(line, `"session.rollback"`) && !strings.Contains(line, "limits.diff.entries") {
			t.Errorf("the log records the refused rollback as made, with no word of its failure:\n%s", line)
		}
	}
	if r := w.cordon("", "session", "stop", id); r.code == 0 || r.code == 125 {
		t.Logf("stop: exit %d", r.code)
	} else {
		t.Errorf("stop after the refused rollback: %v", r)
	}
}
