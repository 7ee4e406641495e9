package fsdiff

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestForkRereadsOnlyChanges: a fork's baseline re-reads only changed files, and each
// fork diffs against its own baseline.
func TestForkRereadsOnlyChanges(t *testing.T) {
	ctx := context.Background()
	dir, shared := trackerOf(t, "a", "b", "c")
	// Past the racy window, so unchanged files are trusted by their stat key.
	shared.base = rescanned(t, shared)
	first, since, err := shared.Fork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r := first.Baseline().Read; r != 0 {
		t.Errorf("fork of an unchanged workspace re-read %d files", r)
	}
	if err := os.WriteFile(filepath.Join(dir, "b"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	second, since2, err := shared.Fork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(since.Changes) != 0 || len(since2.Changes) != 1 || since2.Changes[0].Path != "b" {
		t.Errorf("what changed since the last snapshot: %+v, then %+v", since.Changes, since2.Changes)
	}
	if r := second.Baseline().Read; r != 1 {
		t.Errorf("fork after one change re-read %d files, want 1", r)
	}
	d1, err := first.Diff(ctx)
	if err != nil || len(d1.Changes) != 1 || d1.Changes[0].Path != "b" {
		t.Fatalf("first fork's diff: %+v %v", d1, err)
	}
	d2, err := second.Diff(ctx)
	if err != nil || len(d2.Changes) != 0 {
		t.Fatalf("second fork's diff (taken after the change): %+v %v", d2, err)
	}
	shared.Adopt(second)
	if shared.base != second.base {
		t.Error("Adopt did not take the fork's baseline")
	}
}

// rescanned returns a snapshot whose entries are not racy (their mtimes moved back).
func rescanned(t *testing.T, tr *Tracker) *snapshot {
	t.Helper()
	for _, e := range tr.base.entries {
		e.racy = false
	}
	return tr.base
}

// ForkWatched forks from a watch's report instead of a walk, and its fork can diff
// from a report in turn (a fork keeps the workspace directory's identity): a
// session's commands cost what changed, start and end.
func TestForkWatched(t *testing.T) {
	ctx := context.Background()
	dir, shared := trackerOf(t, "a", "b")
	shared.base = rescanned(t, shared)
	if err := os.WriteFile(filepath.Join(dir, "a"), []byte("between\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fork, since, why, err := shared.ForkWatched(ctx, Watched{Paths: []ChangedPath{{Path: "a"}}})
	if err != nil || why != "" {
		t.Fatal(why, err)
	}
	if len(since.Changes) != 1 || since.Changes[0].Path != "a" {
		t.Errorf("what changed between: %+v", since.Changes)
	}
	if err := os.WriteFile(filepath.Join(dir, "b"), []byte("command\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, why, err := fork.DiffWatched(ctx, Watched{Paths: []ChangedPath{{Path: "b"}}})
	if err != nil || why != "" {
		t.Fatal(why, err)
	}
	if len(res.Changes) != 1 || res.Changes[0].Path != "b" {
		t.Errorf("the command's changes: %+v", res.Changes)
	}
	shared.Adopt(fork)
	// A walk from the adopted snapshot finds nothing the reports missed.
	if res, err := shared.Diff(ctx); err != nil || len(res.Changes) != 0 {
		t.Errorf("a walk after the watched fork and diff: %+v, %v", res, err)
	}
	// A plain Fork's tracker diffs from a report too.
	walked, _, err := shared.Fork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, why, err := walked.DiffWatched(ctx, Watched{}); why != "" || err != nil {
		t.Errorf("a forked tracker cannot diff from a report: %q %v", why, err)
	}
}

// trackerOf is a Tracker of a new directory holding the files names, each with its
// name as its line.
func trackerOf(t *testing.T, names ...string) (string, *Tracker) {
	t.Helper()
	dir := t.TempDir()
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(n+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := New(context.Background(), dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return dir, tr
}
