package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLockWorkspace: one live run per workspace tree. A second direct run in the same
// workspace, in a directory inside it or in one holding it is refused, whichever
// comes first, and also through a symbolic link to it; staged runs share a workspace
// with each other but never with a direct one; released, the workspace is free.
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
	lock := func(dir string, shared bool) (*wsLock, error) { return lockWorkspace("", dir, shared) }
	refused := func(what, dir string, shared bool, want string) {
		t.Helper()
		l, err := lock(dir, shared)
		if err == nil {
			l.release()
			t.Errorf("%s: taken; want refused", what)
			return
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want it to say %q", what, err, want)
		}
	}

	a, err := lock(ws, false)
	if err != nil {
		t.Fatal(err)
	}
	refused("the same workspace", ws, false, "is in use")
	refused("the same workspace through a link", link, false, "is in use")
	refused("a staged run there", ws, true, "is in use")
	refused("a directory inside it", sub, false, "is inside "+ws)
	refused("the directory holding it", root, false, "is in use")
	b, err := lock(other, false)
	if err != nil {
		t.Fatalf("a workspace beside it: %v", err)
	}
	b.release()
	a.release()
	a.release() // idempotent

	c, err := lock(sub, false)
	if err != nil {
		t.Fatalf("the inner workspace once the outer was released: %v", err)
	}
	refused("the directory holding a live one", ws, false, "is in use")
	c.release()

	s1, err := lock(ws, true)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := lock(ws, true)
	if err != nil {
		t.Errorf("a second staged run: %v", err)
	}
	refused("a direct run beside staged ones", ws, false, "is in use")
	s1.release()
	s2.release()
	d, err := lock(ws, false)
	if err != nil {
		t.Fatalf("the workspace once every hold was released: %v", err)
	}
	d.release()
}
