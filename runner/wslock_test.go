package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLockWorkspace: one live run per workspace tree. A second direct run in the same
// workspace, in a directory inside it or in one holding it is refused, whichever
// comes first, and also through a symbolic link to it; released, the workspace is
// free.
func TestLockWorkspace(t *testing.T) {
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	sub := filepath.Join(ws, "sub")
	other := filepath.Join(root, "other")
	for _, d := range []string{sub, other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(root, "link")
	if err := os.Symlink(ws, link); err != nil {
		t.Fatal(err)
	}
	lock := func(dir string) (*wsLock, error) { return lockWorkspace("", dir) }
	refused := func(what, dir string, want string) {
		t.Helper()
		l, err := lock(dir)
		if err == nil {
			l.release()
			t.Errorf("%s: taken; want refused", what)
			return
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want it to say %q", what, err, want)
		}
	}

	a, err := lock(ws)
	if err != nil {
		t.Fatal(err)
	}
	refused("the same workspace", ws, "is in use")
	refused("the same workspace through a link", link, "is in use")
	refused("a staged run there", ws, "is in use")
	refused("a directory inside it", sub, "is inside "+ws)
	refused("the directory holding it", root, "is in use")
	b, err := lock(other)
	if err != nil {
		t.Fatalf("a workspace beside it: %v", err)
	}
	b.release()
	a.release()
	a.release() // idempotent

	c, err := lock(sub)
	if err != nil {
		t.Fatalf("the inner workspace once the outer was released: %v", err)
	}
	refused("the directory holding a live one", ws, "is in use")
	c.release()

	s1, err := lock(ws)
	if err != nil {
		t.Fatal(err)
	}
	refused("a second run, staged or not", ws, "is in use")
	s1.release()
	d, err := lock(ws)
	if err != nil {
		t.Fatalf("the workspace once every hold was released: %v", err)
	}
	d.release()
}

// BenchmarkLockWorkspace: what holding a workspace costs a run's start (the
// directories above it, the mount table read for its other paths).
func BenchmarkLockWorkspace(b *testing.B) {
	ws := filepath.Join(b.TempDir(), "a", "b", "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		l, err := lockWorkspace("", ws)
		if err != nil {
			b.Fatal(err)
		}
		l.release()
	}
}
