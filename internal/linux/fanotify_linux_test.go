package linux

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
)

// WatchCreates reports a directory made, and one moved into place, with its directory's
// path, and only the names the filter keeps.
func TestWatchCreates(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	w, err := WatchCreates(dir, func(n string, _ bool) bool { return n == ".git" })
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := os.MkdirAll(filepath.Join(dir, "a", "other"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "a", ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "prep"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "prep"), filepath.Join(dir, "b", ".git")); err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "a"), filepath.Join(dir, "b")}
	for _, d := range want {
		select {
		case c := <-w.Events():
			if c.Dir != d || c.Name != ".git" {
				t.Fatalf("got %+v, want %s/.git", c, d)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no event for %s/.git", d)
		}
	}
}
