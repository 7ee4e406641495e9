package layer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestApplyReadsTheUpperWithoutLinks: a change set read from the upper directory names
// the file d/f; by the time it lands, the sandbox (or whoever else writes the upper)
// has made d a link to a host directory holding f. The host file never lands in the
// workspace: the upper is read through no link, at any component.
func TestApplyReadsTheUpperWithoutLinks(t *testing.T) {
	top := t.TempDir()
	ws, upper, host := filepath.Join(top, "ws"), filepath.Join(top, "upper"), filepath.Join(top, "host")
	for _, d := range []string{ws, filepath.Join(upper, "d"), host} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(host, "f"), []byte("HOST SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(upper, "d", "f"), []byte("staged"), 0o644); err != nil {
		t.Fatal(err)
	}
	l := Landing{Workspace: ws, Upper: upper, Writable: func(string) bool { return true }, UID: -1, GID: -1}
	changes := []Change{{Path: "d", Kind: Dir, Mode: 0o755}, {Path: "d/f", Kind: File, Mode: 0o644, Size: 6}}
	// The swap: d becomes a link to the host directory.
	if err := os.Rename(filepath.Join(upper, "d"), filepath.Join(upper, "d.old")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(host, filepath.Join(upper, "d")); err != nil {
		t.Fatal(err)
	}
	_, err := Apply(l, changes)
	if data, rerr := os.ReadFile(filepath.Join(ws, "d", "f")); rerr == nil && strings.Contains(string(data), "SECRET") {
		t.Fatalf("the host file landed through a link in the upper (Apply: %v)", err)
	}
	if err == nil {
		t.Fatal("Apply succeeded though the staged file could not be read")
	}
}
