package layer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// testMax is the bound the tests that are not about it pass: limits.diff.entries'
// default.
const testMax = 100_000

// fillUpper makes, below a new upper directory, a directory wide of n empty files
// and one more file at the top: n+2 entries.
func fillUpper(t *testing.T, n int) string {
	t.Helper()
	upper := t.TempDir()
	wide := filepath.Join(upper, "wide")
	if err := os.Mkdir(wide, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := os.WriteFile(filepath.Join(wide, fmt.Sprintf("f%05d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(upper, "top"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	return upper
}

// TestStagedReadsBounded: what a sandbox puts in a staged session's upper directory
// is read by cordon on the host before every command (the automatic checkpoint) and
// by a rollback: each of those reads holds at most max entries of it, past which it
// stops with ErrTooMany, however the entries are laid out; at the bound they pass.
func TestStagedReadsBounded(t *testing.T) {
	const n = 3000 // three batches of names in one directory
	upper := fillUpper(t, n)
	atBound := n + 2
	c, err := TakeCheckpoint(upper, "", filepath.Join(t.TempDir(), "c"), nil, atBound)
	if err != nil {
		t.Fatalf("a checkpoint of %d entries at a bound of %d: %v", atBound, atBound, err)
	}
	if c.Copied != n+1 {
		t.Errorf("the checkpoint copied %d files, want %d", c.Copied, n+1)
	}
	if _, err := TakeCheckpoint(upper, "", filepath.Join(t.TempDir(), "c"), nil, atBound-1); !errors.Is(err, ErrTooMany) {
		t.Errorf("a checkpoint of %d entries at a bound of %d: %v, want ErrTooMany", atBound, atBound-1, err)
	}
	if got, err := UpperPaths(upper, "", atBound); err != nil || len(got) != atBound {
		t.Errorf("UpperPaths at the bound: %d paths, %v; want %d", len(got), err, atBound)
	}
	if _, err := UpperPaths(upper, "", atBound-1); !errors.Is(err, ErrTooMany) {
		t.Errorf("UpperPaths past the bound: %v, want ErrTooMany", err)
	}
	same, err := c.Unchanged(upper, "", atBound)
	if err != nil || len(same) != n+1 {
		t.Errorf("Unchanged at the bound: %d unchanged, %v; want %d", len(same), err, n+1)
	}
	if _, err := c.Unchanged(upper, "", atBound-1); !errors.Is(err, ErrTooMany) {
		t.Errorf("Unchanged past the bound: %v, want ErrTooMany", err)
	}
}

// TestUpperPathsParentsFirst: a directory's path comes before the paths below it,
// whatever order the directory lists them in (Rollback sorts them, restore relies on
// nothing else).
func TestUpperPathsParentsFirst(t *testing.T) {
	upper := fillUpper(t, 10)
	got, err := UpperPaths(upper, "", testMax)
	if err != nil {
		t.Fatal(err)
	}
	at := map[string]int{}
	for i, p := range got {
		at[p] = i
	}
	for _, p := range got {
		if d := filepath.Dir(p); d != "." && at[d] > at[p] {
			t.Errorf("%s listed before its parent %s", p, d)
		}
	}
	if len(got) != 12 {
		t.Errorf("%d paths, want 12: %q", len(got), got)
	}
}
