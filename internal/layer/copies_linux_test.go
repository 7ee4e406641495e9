package layer

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
)

// restoredDir is an overlay world whose directory d the sandbox removed and a
// rollback restored: the upper directory holds d opaque, a copy of each of its
// entries, where the checkpoint held nothing.
func restoredDir(t *testing.T) *overlayWorld {
	w := newOverlayWorld(t)
	c1, err := TakeCheckpoint(w.upper, w.ws, filepath.Join(w.stage, "c1"), nil, testMax)
	if err != nil {
		t.Fatal(err)
	}
	if err := removeAll(w.live, "d", 0); err != nil {
		t.Fatal(err)
	}
	w.rollback(c1)
	if v, err := linux.Getxattr(filepath.Join(w.upper, "d"), xattrOpaque); err != nil || v != "y" {
		t.Fatalf("the restored d is not an opaque directory of the upper directory (%q, %v): the test tests nothing", v, err)
	}
	return w
}

// A directory a rollback restored is no change to any reader of the upper
// directory: nothing below it is counted against the bound, listed, or copied into
// a checkpoint, and the overlay shows the workspace's files. Without the workspace
// to compare with, it is counted in full.
func TestRestoredDirIsNoChange(t *testing.T) {
	w := restoredDir(t)
	if got := w.state(); got != "a.txt:one b.txt:keep d:dir d/x:x n:- n/z:-" {
		t.Errorf("after the rollback: %s", got)
	}
	if data, err := os.ReadFile(filepath.Join(linux.FDPath(w.open(w.ws)), "d/sub/z")); err != nil || string(data) != "z\n" {
		t.Errorf("the workspace's d/sub/z: %q %v", data, err)
	}
	// d's names, each a copy (read within twice the bound in all, both sides: see
	// lowerView); the upper directory holds four.
	const max = 3
	if s, err := Read(w.upper, w.ws, max); err != nil || len(s.Changes) != 0 || len(s.Problems) != 0 {
		t.Errorf("Read of the restored directory: %v, %v", s, err)
	}
	if _, err := Read(w.upper, "", max); !errors.Is(err, ErrTooMany) {
		t.Errorf("Read without the workspace: %v, want ErrTooMany (the copies counted)", err)
	}
	if got, err := UpperPaths(w.upper, w.ws, max); err != nil || !slices.Equal(got, []string{"d"}) {
		t.Errorf("UpperPaths: %q, %v", got, err)
	}
	c, err := TakeCheckpoint(w.upper, w.ws, filepath.Join(w.stage, "c2"), nil, max)
	if err != nil {
		t.Fatalf("checkpoint of the restored directory: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(c.Dir, "d")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the checkpoint holds d: %v", err)
	}
	if _, err := c.Unchanged(w.upper, w.ws, max); err != nil {
		t.Errorf("Unchanged: %v", err)
	}
}

// Anything the sandbox writes in a restored directory makes it a change again,
// listed in full: nothing it wrote there is left out of the change set.
func TestRestoredDirChangedIsListed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(w *overlayWorld) error
		want   string // a path the change set must list, besides d
	}{
		{"content", func(w *overlayWorld) error {
			return os.WriteFile(filepath.Join(w.live.Path(), "d/sub/z"), []byte("y\n"), 0o644)
		}, "d/sub/z"},
		{"mtime", func(w *overlayWorld) error {
			return os.Chtimes(filepath.Join(w.live.Path(), "d/x"), time.Time{}, time.Unix(1, 0))
		}, "d/x"},
		{"mode", func(w *overlayWorld) error { return os.Chmod(filepath.Join(w.live.Path(), "d/x"), 0o600) }, "d/x"},
		{"xattr", func(w *overlayWorld) error {
			return linux.Lsetxattr(filepath.Join(w.live.Path(), "d/x"), "user.a", "v")
		}, "d/x"},
		{"new name", func(w *overlayWorld) error { w.write("d/new", "n\n"); return nil }, "d/new"},
		{"removed name", func(w *overlayWorld) error { return w.live.Remove("d/x") }, "d/sub/z"},
		{"link", func(w *overlayWorld) error {
			if err := w.live.Remove("d/x"); err != nil {
				return err
			}
			return w.live.Symlink("d/x", "x", -1, -1)
		}, "d/x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := restoredDir(t)
			if err := tc.change(w); err != nil {
				t.Fatal(err)
			}
			s, err := Read(w.upper, w.ws, testMax)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range s.Changes {
				got = append(got, c.Path)
				if c.Path == "d" && (c.Kind != Dir || !c.Opaque) {
					t.Errorf("d: %+v, want an opaque directory", c)
				}
			}
			if !slices.Contains(got, "d") || !slices.Contains(got, tc.want) {
				t.Errorf("changes %q, want d and %s", got, tc.want)
			}
			if paths, err := UpperPaths(w.upper, w.ws, testMax); err != nil || !slices.Contains(paths, tc.want) {
				t.Errorf("UpperPaths %q, %v: want %s", paths, err, tc.want)
			}
		})
	}
}

// What telling a copy reads is bounded for one call of a reader (lowerView): past its
// names or its bytes, a restored directory is not taken as a copy, and is counted.
func TestRestoredDirPastTheBudgetCounts(t *testing.T) {
	w := restoredDir(t)
	up, err := linux.OpenTree(w.upper)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	view := func(names int, bytes int64) *lowerView {
		l := openLower(w.ws, up, 100)
		t.Cleanup(l.Close)
		l.entries, l.bytes = names, bytes
		return l
	}
	root, err := up.OpenDir(".")
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	// d holds x and sub, sub holds z: six names on both sides, two files of two bytes
	// read on both sides, and the attributes of d and below: d's opaque mark, "y".
	for _, c := range []struct {
		names int
		bytes int64
		want  bool
	}{
		{100, 1 << 20, true},
		{6, 4*2 + 1, true},
		{5, 1 << 20, false},
		{100, 4 * 2, false},
	} {
		if got := isCopy(root, "d", "d", view(c.names, c.bytes)); got != c.want {
			t.Errorf("a budget of %d names and %d bytes: a copy %v, want %v", c.names, c.bytes, got, c.want)
		}
	}
}

// The directories that telling copies opens by their paths (mergedAt) are opened once
// each per reader call, and the names those walks take come from a budget: past it,
// nothing below is merged, so a sandbox's deep chains of directories cost the host
// no more than that.
func TestMergedAtWalksWithinTheBudget(t *testing.T) {
	upper := t.TempDir()
	chain := "c"
	for range 39 {
		chain += "/c"
	}
	if err := os.MkdirAll(filepath.Join(upper, chain), 0o755); err != nil {
		t.Fatal(err)
	}
	up, err := linux.OpenTree(upper)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	b := &lowerView{up: up, steps: 40 * 41 / 2} // each of the 40 directories, once
	if !b.mergedAt(chain) || b.steps != 0 {
		t.Fatalf("a chain of 40 directories: merged %v, %d steps left; want merged, none left", b.merged[chain], b.steps)
	}
	if !b.mergedAt(chain) || !b.mergedAt(filepath.Dir(chain)) {
		t.Error("a directory asked of again is walked again, past the budget")
	}
	b = &lowerView{up: up, steps: 40*41/2 - 1}
	if b.mergedAt(chain) {
		t.Error("a chain of 40 directories one step past the budget is merged")
	}
}
