package linux

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

// TestWatchCreatesUnmark: Unmark removes the group's mark (the kernel lists none for
// its descriptor) and what the watch had queued before it is still delivered; Close
// after it still ends the watch.
func TestWatchCreatesUnmark(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	w, err := WatchCreates(dir, func(n string, _ bool) bool { return n == ".git" })
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	marks := func() int {
		b, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(w.fd))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(string(b), "fanotify sdev:")
	}
	if n := marks(); n != 1 {
		t.Fatalf("%d file-system marks before Unmark, want 1", n)
	}
	if err := os.MkdirAll(filepath.Join(dir, "a", ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := w.Unmark(); err != nil {
		t.Fatal(err)
	}
	if n := marks(); n != 0 {
		t.Fatalf("%d file-system marks after Unmark, want none", n)
	}
	select {
	case c := <-w.Events():
		if c.Dir != filepath.Join(dir, "a") || c.Name != ".git" {
			t.Fatalf("got %+v, want a/.git", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("what was made before Unmark was not delivered")
	}
	w.Close()
	for c := range w.Events() {
		t.Fatalf("an event after Unmark: %+v", c)
	}
}
