package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStageRedHostileNamesInLog: names with newlines land as they are named, are
// printed escaped, and the log still verifies with them.
func TestStageRedHostileNamesInLog(t *testing.T) {
	w := newStageWorld(t)
	id := w.stage(`n=$(printf 'a\nfake: \033[31mline'); echo x > "$n"; mkfifo "$n.fifo"`)
	r := w.cordon("", "apply", id)
	if r.code != 0 {
		t.Fatalf("apply: %v", r)
	}
	if strings.ContainsAny(r.stderr+r.stdout, "\033") || strings.Contains(r.stderr, "\nfake:") {
		t.Fatalf("a hostile name reached the terminal raw: %q", r.stderr)
	}
	w.verify(id)
	for _, args := range [][]string{{"audit", "show", id}, {"audit", "show", "--diff", id}} {
		if show := w.cordon("", args...); strings.ContainsAny(show.stdout+show.stderr, "\033") {
			t.Errorf("%v printed a hostile name raw: %q", args, show.stdout)
		}
	}
	if _, err := os.Lstat(filepath.Join(w.ws, "a\nfake: \033[31mline")); err != nil {
		t.Errorf("the file did not land under its name: %v", err)
	}
}

// TestStageRedLogTailTruncated: the stage.apply line is the log's evidence that the
// workspace changed after the run. Cutting it off must not leave a log that verifies
// as intact.
func TestStageRedLogTailTruncated(t *testing.T) {
	w := newStageWorld(t)
	id := w.stage(`echo two > a.txt`)
	if r := w.cordon("", "apply", id); r.code != 0 {
		t.Fatalf("apply: %v", r)
	}
	p := filepath.Join(w.audit, id, "events.jsonl")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSuffix(string(data), "\n"), "\n")
	last := lines[len(lines)-1]
	if !strings.Contains(last, `"type":"stage.apply"`) {
		t.Fatalf("the last line is not stage.apply: %s", last)
	}
	if err := os.WriteFile(p, []byte(strings.Join(lines[:len(lines)-1], "")), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := w.cordon("", "audit", "verify", id); r.code == 0 {
		t.Fatalf("a log with its stage.apply cut off verifies: %v", r)
	}
}

// TestStageRedLogPartialApplyCut: the line of a partial apply cut off, the stage
// still there: the log verifies (the stage waits), but apply refuses to extend a log
// that no longer says what was landed.
func TestStageRedLogPartialApplyCut(t *testing.T) {
	w := newStageWorld(t)
	id := w.stage(`echo two > a.txt; echo new > c.txt`)
	p := filepath.Join(w.audit, id, "events.jsonl")
	sealed, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if r := w.cordon("", "apply", id, "c.txt"); r.code != 0 {
		t.Fatalf("apply c.txt: %v", r)
	}
	if err := os.WriteFile(p, sealed, 0o600); err != nil {
		t.Fatal(err)
	}
	r := w.cordon("", "apply", id)
	if r.code == 0 {
		t.Fatalf("apply extended a log cut back past a partial apply: %v", r)
	}
	if w.read("a.txt") != "one\n" {
		t.Errorf("apply landed on a log that lost a line: %q", w.read("a.txt"))
	}
	assertContains(t, "apply's refusal", r.stderr, "cut off")
}
