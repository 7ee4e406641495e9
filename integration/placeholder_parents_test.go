package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNestedDenyParentCannotBeMovedAway: a denied a/b/secret whose parents do not
// exist gets them made for its placeholder. The sandbox moves them away (with the mask
// inside) and makes a/b afresh: the denied path must still not be created on the host.
func TestNestedDenyParentCannotBeMovedAway(t *testing.T) {
	w := newWorld(t)
	w.contract("version: 1\nfilesystem:\n  deny_read: [a/b/secret]\n")
	r := w.sh("mv a a2 2>&1; mv a/b a/b2 2>&1; mkdir -p a/b; echo x > a/b/secret && echo WROTE; " +
		"echo y > a/beside && echo BESIDE; true")
	if r.code != 0 {
		t.Fatalf("run: %v", r)
	}
	if strings.Contains(r.stdout, "WROTE") {
		t.Errorf("the sandbox created the denied a/b/secret: %s", r.stdout)
	}
	for _, p := range []string{"a/b/secret", "a2/b/secret", "a/b2/secret"} {
		if data, err := os.ReadFile(filepath.Join(w.ws, p)); err == nil && len(data) > 0 {
			t.Errorf("the host holds %s, written by the sandbox: %q", p, data)
		}
	}
	// The parents made for the placeholder are the sandbox's to write beside it, and
	// stay when it did.
	if !strings.Contains(r.stdout, "BESIDE") || !exists(filepath.Join(w.ws, "a", "beside")) {
		t.Errorf("the sandbox could not write beside the denied path: %s", r.stdout)
	}
}
