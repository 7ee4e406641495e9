package fsdiff

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/testutil"
)

// dirOp does one random directory-heavy operation in dir (or out, beside it).
func dirOp(r *rand.Rand, dir, out string) string {
	pick := func(root string, dirs bool) string { return pickEntry(r, root, dirs) }
	anyRoot := func() string { return pickRoot(r, dir, out) }
	newName := func(root string) string {
		d := pick(root, true)
		if d == "" || r.IntN(4) == 0 {
			d = root
		}
		return filepath.Join(d, fmt.Sprintf("n%d", r.IntN(50)))
	}
	switch op := r.IntN(10); op {
	case 0: // a deep new tree
		p := newName(dir)
		err := os.MkdirAll(filepath.Join(p, "a", "b"), 0o755)
		_ = os.WriteFile(filepath.Join(p, "a", "x"), []byte("x\n"), 0o644)
		_ = os.WriteFile(filepath.Join(p, "a", "b", "y"), []byte("y\n"), 0o644)
		return fmt.Sprint("mkdir tree ", p, err)
	case 1: // a directory moved, anywhere
		d := pick(anyRoot(), true)
		if d == "" {
			return "no dir"
		}
		to := newName(anyRoot())
		return fmt.Sprint("rename dir ", d, " ", to, os.Rename(d, to))
	case 2: // a directory replaced by a file
		d := pick(dir, true)
		if d == "" {
			return "no dir"
		}
		err := os.RemoveAll(d)
		return fmt.Sprint("dir to file ", d, err, os.WriteFile(d, []byte("was a dir\n"), 0o644))
	case 3: // a file replaced by a directory
		f := pick(dir, false)
		if f == "" {
			return "no file"
		}
		err := os.Remove(f)
		_ = os.Mkdir(f, 0o755)
		return fmt.Sprint("file to dir ", f, err, os.WriteFile(filepath.Join(f, "in"), []byte("in\n"), 0o644))
	case 4: // a file made in a directory
		d := pick(dir, true)
		if d == "" {
			d = dir
		}
		p := filepath.Join(d, fmt.Sprintf("c%d", r.IntN(50)))
		return fmt.Sprint("create ", p, os.WriteFile(p, []byte(fmt.Sprint(r.IntN(9))), 0o644))
	case 5: // a file removed
		f := pick(dir, false)
		return fmt.Sprint("remove ", f, os.Remove(f))
	case 6: // a directory renamed over an empty one
		a, b := pick(dir, true), pick(dir, true)
		return fmt.Sprint("rename over ", a, " ", b, os.Rename(a, b))
	case 7: // a file moved
		f := pick(anyRoot(), false)
		to := newName(anyRoot())
		return fmt.Sprint("rename ", f, " ", to, os.Rename(f, to))
	case 8: // two entries exchanged in place
		a, b := pick(dir, r.IntN(2) == 0), pick(dir, r.IntN(2) == 0)
		return fmt.Sprint("exchange ", a, " ", b, linux.Exchange(a, b))
	default: // a tree removed
		d := pick(dir, true)
		if d == "" {
			return "no dir"
		}
		return fmt.Sprint("remove tree ", d, os.RemoveAll(d))
	}
}

// sameEntries fails unless two snapshots hold the same paths, of the same kind and
// content.
func sameEntries(t *testing.T, what string, want, got *snapshot) bool {
	t.Helper()
	ok := true
	for p, e := range want.entries {
		g := got.entries[p]
		switch {
		case g == nil:
			t.Errorf("%s: %s (%v) missing from the watched snapshot", what, p, e.kind)
			ok = false
		case g.kind != e.kind || g.sum != e.sum || g.mode != e.mode:
			t.Errorf("%s: %s differs: walked %v %x, watched %v %x", what, p, e.kind, e.sum[:4], g.kind, g.sum[:4])
			ok = false
		}
	}
	for p, g := range got.entries {
		if want.entries[p] == nil {
			t.Errorf("%s: %s (%v) in the watched snapshot, not in a fresh walk", what, p, g.kind)
			ok = false
		}
	}
	return ok
}

// TestRT13DirectoryChains: long chains of watched diffs with directory-heavy
// operations (trees made, moved in, out and over each other, replaced by files and
// back), each round's snapshot compared with a fresh walk's. $CORDON_RT13_SEEDS seeds
// (the red team ran 40), 3 by default: each is some 3 s of CPU under the race detector,
// beside the integration lanes of make test.
func TestRT13DirectoryChains(t *testing.T) {
	testutil.RequireRoot(t)
	seeds := 3
	if n, err := strconv.Atoi(os.Getenv("CORDON_RT13_SEEDS")); err == nil && n > 0 {
		seeds = n
	}
	if testing.Short() {
		seeds = 2
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			top := t.TempDir()
			dir, out := filepath.Join(top, "ws"), filepath.Join(top, "out")
			must(t, os.Mkdir(out, 0o755))
			files := map[string]string{}
			for i := range 20 {
				files[fmt.Sprintf("d%d/e%d/f%d", i%3, i%2, i)] = fmt.Sprintf("line %d\n", i)
			}
			newWSAt(t, dir, files)
			w, err := linux.WatchChanges(dir, func(string, bool) bool { return false }, 1<<20)
			must(t, err)
			defer w.Close()
			go func() {
				for range w.Events() {
				}
			}()
			ctx := context.Background()
			time.Sleep(2 * racyWindow)
			watched, err := New(ctx, dir, Options{})
			must(t, err)
			w.TakeChanges()
			r := rand.New(rand.NewPCG(uint64(seed), 1313))
			var log []string
			for round := range 15 {
				for range 1 + r.IntN(5) {
					log = append(log, dirOp(r, dir, out))
				}
				time.Sleep(2 * racyWindow) // the condition is the clock: nothing racy
				c := w.TakeChanges()
				if c.Untrusted != "" {
					// A busy machine's events overflowed the queue (the mark is the
					// whole file system's): the runner walks, and so does the test.
					t.Logf("round %d: %s: walked", round, c.Untrusted)
					_, err := watched.Diff(ctx)
					must(t, err)
					continue
				}
				_, why, err := watched.DiffWatched(ctx, WatchedFrom(c.Paths, c.Objects))
				if err != nil || why != "" {
					t.Fatalf("round %d: watched diff: %v %s", round, err, why)
				}
				fresh, err := New(ctx, dir, Options{})
				must(t, err)
				if !sameEntries(t, fmt.Sprint("round ", round), fresh.base, watched.base) {
					keys := slices.Sorted(func(yield func(string) bool) {
						for p := range c.Paths {
							if !yield(p) {
								return
							}
						}
					})
					t.Fatalf("operations: %q\nchange set: %v", log, keys)
				}
			}
		})
	}
}

// A name that is not valid UTF-8 is a name on Linux: a walk records what lies below
// it, and so must a diff from a watch's report.
func TestRT13NonUTF8Names(t *testing.T) {
	testutil.RequireRoot(t)
	top := t.TempDir()
	dir := filepath.Join(top, "ws")
	w := newWSAt(t, dir, map[string]string{"\xff/f": "original\n", "g\xfe": "original\n"})
	walk, watched := bothWaysOld(t, dir, Options{}, true, func() {
		must(t, os.WriteFile(w.path("\xff/f"), []byte("changed!\n"), 0o644))
		must(t, os.WriteFile(w.path("g\xfe"), []byte("changed!\n"), 0o644))
		must(t, os.WriteFile(w.path("\xfd"), []byte("new\n"), 0o644))
	})
	if len(walk.Changes) != 3 {
		t.Errorf("the walk saw %d changes, want 3: %+v", len(walk.Changes), walk.Changes)
	}
	sameDiff(t, walk, watched)
}

// The same for a staged run's change set: a path below a name that is not UTF-8 is
// compared, not dropped.
func TestRT13NonUTF8NamesChanged(t *testing.T) {
	top := t.TempDir()
	before, after := filepath.Join(top, "before"), filepath.Join(top, "after")
	newWSAt(t, before, map[string]string{"\xff/f": "original\n"})
	newWSAt(t, after, map[string]string{"\xff/f": "changed!\n"})
	res, err := DiffChanged(context.Background(), before, after, []ChangedPath{{Path: "\xff/f"}}, Options{})
	must(t, err)
	if len(res.Changes) != 1 {
		t.Errorf("want the change below a name that is not UTF-8, got %+v", res.Changes)
	}
}

// The workspace's directory renamed and renamed back (by the host, between two
// commands), files written meanwhile: the watch placed the writes' directories by
// their paths then, outside the workspace's, and dropped them. The set must say it
// cannot be trusted, or hold them.
func TestRT13WorkspaceRenamedBack(t *testing.T) {
	testutil.RequireRoot(t)
	top := t.TempDir()
	dir := filepath.Join(top, "ws")
	newWSAt(t, dir, map[string]string{"d/f": "original\n", "g": "original\n"})
	waitTick(t, dir)
	w, err := linux.WatchChanges(dir, func(string, bool) bool { return false }, 1<<20)
	must(t, err)
	defer w.Close()
	go func() {
		for range w.Events() {
		}
	}()
	ctx := context.Background()
	time.Sleep(2 * racyWindow) // the condition is the clock: nothing racy at the baseline
	walked, err := New(ctx, dir, Options{})
	must(t, err)
	watched, err := New(ctx, dir, Options{})
	must(t, err)
	w.TakeChanges()
	moved := filepath.Join(top, "elsewhere")
	must(t, os.Rename(dir, moved))
	must(t, os.WriteFile(filepath.Join(moved, "d", "f"), []byte("changed!\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(moved, "g"), []byte("changed!\n"), 0o644))
	w.Changes() // the watch places the writes while the directory is away
	must(t, os.Rename(moved, dir))
	c := w.TakeChanges()
	if c.Untrusted != "" {
		return // the diff walks
	}
	walk, err := walked.Diff(ctx)
	must(t, err)
	got, why, err := watched.DiffWatched(ctx, WatchedFrom(c.Paths, c.Objects))
	if err != nil || why != "" {
		return
	}
	if len(walk.Changes) != 2 {
		t.Errorf("the walk saw %d changes, want 2: %+v", len(walk.Changes), walk.Changes)
	}
	sameDiff(t, walk, got)
}

// Two directories (and a file with a directory) exchanged in place.
func TestRT13Exchange(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWS(t, map[string]string{"a/x/f": "one\n", "b/y": "two\n", "c": "three\n", "a/g": "four\n"})
	walk, watched := bothWaysOld(t, w.dir, Options{}, true, func() {
		must(t, linux.Exchange(w.path("a"), w.path("b")))
		must(t, linux.Exchange(w.path("c"), w.path("b/x")))
	})
	if len(walk.Changes) == 0 {
		t.Fatal("the walk saw nothing")
	}
	sameDiff(t, walk, watched)
}
