package layer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/testutil"
)

// overlayWorld is a real overlay (detached, reached through its mount fd) of a
// workspace of four files, written through like a staged session's.
type overlayWorld struct {
	t                *testing.T
	ws, upper, stage string
	live             *linux.Tree
}

func newOverlayWorld(t *testing.T) *overlayWorld {
	testutil.RequireRoot(t)
	w := &overlayWorld{t: t, ws: t.TempDir(), stage: t.TempDir()}
	for p, data := range map[string]string{"a.txt": "one\n", "b.txt": "keep\n", "d/x": "x\n", "d/sub/z": "z\n"} {
		full := filepath.Join(w.ws, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w.upper = filepath.Join(w.stage, "upper")
	work := filepath.Join(w.stage, "work")
	for _, d := range []string{w.upper, work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	lower, upper, wk := w.open(w.ws), w.open(w.upper), w.open(work)
	ov, err := linux.NewOverlay(lower, upper, wk)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ov.Close() })
	if w.live, err = linux.TreeOf(ov); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.live.Close() })
	return w
}

func (w *overlayWorld) open(p string) *os.File {
	f, err := linux.OpenDirNoLinks(p)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { f.Close() })
	return f
}

func (w *overlayWorld) write(rel, data string) {
	if err := w.live.WriteFile(rel, strings.NewReader(data), 0o644, -1, -1); err != nil {
		w.t.Fatal(err)
	}
}

// state lists what the live overlay holds at the workspace's paths.
func (w *overlayWorld) state() string {
	var out []string
	for _, p := range []string{"a.txt", "b.txt", "d", "d/x", "n", "n/z"} {
		st, err := w.live.Lstat(p)
		switch {
		case err != nil:
			out = append(out, p+":-")
		case st.Mode&0o170000 == 0o040000:
			out = append(out, p+":dir")
		default:
			f, err := w.live.Open(p)
			if err != nil {
				w.t.Fatal(err)
			}
			data := make([]byte, 64)
			n, _ := f.Read(data)
			f.Close()
			out = append(out, p+":"+strings.TrimSpace(string(data[:n])))
		}
	}
	return strings.Join(out, " ")
}

func (w *overlayWorld) rollback(c *Checkpoint) []string {
	changed, problems := w.rollbackProblems(c)
	if len(problems) > 0 {
		w.t.Fatalf("rollback: %v", problems)
	}
	return changed
}

// rollbackProblems is rollback, returning the problems it reports.
func (w *overlayWorld) rollbackProblems(c *Checkpoint) ([]string, []Problem) {
	top, ws := w.open(c.Dir), w.open(w.ws)
	view, err := linux.NewOverlayView(top, ws)
	if err != nil {
		w.t.Fatal(err)
	}
	defer view.Close()
	want, err := linux.TreeOf(view)
	if err != nil {
		w.t.Fatal(err)
	}
	defer want.Close()
	now, _ := UpperPaths(w.upper, w.ws, testMax)
	then, _ := UpperPaths(c.Dir, w.ws, testMax)
	same, err := c.Unchanged(w.upper, w.ws, testMax)
	if err != nil {
		w.t.Fatal(err)
	}
	changed, problems, err := Rollback(w.live, want, append(now, then...), same, -1, -1, testMax)
	if err != nil {
		w.t.Fatalf("rollback: %v", err)
	}
	return changed, problems
}

// A rollback restores an edited file, a deleted one, a deleted directory and removes
// a new one; a second checkpoint links what did not change.
func TestRollbackRestoresTheCheckpoint(t *testing.T) {
	w := newOverlayWorld(t)
	w.write("a.txt", "two\n")
	c1, err := TakeCheckpoint(w.upper, w.ws, filepath.Join(w.stage, "c1"), nil, testMax)
	if err != nil {
		t.Fatal(err)
	}
	at1 := w.state()
	if err := w.live.Remove("b.txt"); err != nil {
		t.Fatal(err)
	}
	if err := removeAll(w.live, "d", 0); err != nil {
		t.Fatal(err)
	}
	if err := w.live.Mkdir("n", 0o755, -1, -1); err != nil {
		t.Fatal(err)
	}
	w.write("n/z", "z\n")
	c2, err := TakeCheckpoint(w.upper, w.ws, filepath.Join(w.stage, "c2"), c1, testMax)
	if err != nil {
		t.Fatal(err)
	}
	if c2.Linked != 1 || c2.Copied != 1 {
		t.Errorf("second checkpoint: linked %d copied %d; want a.txt linked, n/z copied", c2.Linked, c2.Copied)
	}
	if got := w.rollback(c1); len(got) == 0 {
		t.Fatal("the rollback changed nothing")
	}
	if got := w.state(); got != at1 {
		t.Errorf("after rollback: %s\nwant %s", got, at1)
	}
	if got := w.rollback(c2); len(got) == 0 || w.state() != "a.txt:two b.txt:- d:- d/x:- n:dir n/z:z" {
		t.Errorf("rollback forward to c2: %s", w.state())
	}
	if data, _ := os.ReadFile(filepath.Join(w.ws, "b.txt")); string(data) != "keep\n" {
		t.Errorf("the workspace changed under the overlay")
	}
}

// A link where the rollback writes is never followed: the write fails or lands in
// the tree, and nothing appears outside.
func TestRollbackFollowsNoLink(t *testing.T) {
	w := newOverlayWorld(t)
	c1, err := TakeCheckpoint(w.upper, w.ws, filepath.Join(w.stage, "c1"), nil, testMax)
	if err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	if err := removeAll(w.live, "d", 0); err != nil {
		t.Fatal(err)
	}
	if err := w.live.Symlink("d", outside, -1, -1); err != nil {
		t.Fatal(err)
	}
	w.rollback(c1) // d becomes a directory again: the link is replaced, not followed
	if entries, _ := os.ReadDir(outside); len(entries) > 0 {
		t.Fatalf("the rollback wrote through a link: %v", entries)
	}
	if got := w.state(); got != "a.txt:one b.txt:keep d:dir d/x:x n:- n/z:-" {
		t.Errorf("after rollback: %s", got)
	}
}

// A directory the sandbox fills past the bound is never read whole into the
// supervisor: removing or listing it stops at the bound (ErrTooMany, which the
// rollback takes for a problem of that directory); below the bound, a directory of
// many batches of names is removed whole.
func TestRollbackBoundsWhatItLists(t *testing.T) {
	w := newOverlayWorld(t)
	c1, err := TakeCheckpoint(w.upper, w.ws, filepath.Join(w.stage, "c1"), nil, testMax)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.live.Mkdir("n", 0o755, -1, -1); err != nil {
		t.Fatal(err)
	}
	for i := range 3*namesBatch + 1 {
		w.write(fmt.Sprintf("n/f%d", i), "")
	}
	max := 2 * namesBatch
	if err := removeAll(w.live, "n", max); !errors.Is(err, ErrTooMany) {
		t.Errorf("removing a directory past the bound: %v", err)
	}
	if err := w.live.Mkdir("d/many", 0o755, -1, -1); err != nil {
		t.Fatal(err)
	}
	for i := range max + 1 {
		w.write(fmt.Sprintf("d/many/f%d", i), "")
	}
	if _, err := boundedNames(w.live, "d/many", max); !errors.Is(err, ErrTooMany) {
		t.Errorf("listing a directory past the bound: %v", err)
	}
	if err := removeAll(w.live, "n", 0); err != nil {
		t.Fatalf("removing a directory of many batches: %v", err)
	}
	if _, err := w.live.Lstat("n"); err == nil {
		t.Error("n is still there")
	}
	w.rollback(c1)
	if got := w.state(); !strings.Contains(got, "n:-") {
		t.Errorf("after rollback: %s", got)
	}
}
