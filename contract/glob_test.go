package contract

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// "**" in a deny glob matches any number of directories, zero included: the red team
// read top-level and nested keys that `deny_read: ["**/*.pem"]` left visible when it
// matched one level only.
func TestDenyGlobAnyDepth(t *testing.T) {
	dir := realTempDir(t)
	files := []string{"k0.pem", "d1/k1.pem", "d1/d2/k2.pem", "d1/d2/d3/k3.pem", "d1/d2/notes.txt", "services/api/.env"}
	for _, f := range files {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A link to a directory outside is not walked into.
	out := realTempDir(t)
	if err := os.WriteFile(filepath.Join(out, "outside.pem"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(out, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	p, err := compileIn(t, dir, "version: 1\nfilesystem:\n  deny_read: [\"**/*.pem\", \"**/.env\"]\n")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"k0.pem", "d1/k1.pem", "d1/d2/k2.pem", "d1/d2/d3/k3.pem", "services/api/.env"} {
		if m := mountAt(p, filepath.Join(dir, f)); m == nil || m.Access != Hidden {
			t.Errorf("%s: want hidden, got %+v", f, m)
		}
	}
	if m := mountAt(p, filepath.Join(dir, "d1/d2/notes.txt")); m != nil {
		t.Errorf("notes.txt matched: %+v", m)
	}
	for _, m := range p.Mounts {
		if strings.HasPrefix(m.Path, out) {
			t.Errorf("the glob followed a link out of the workspace: %s", m.Path)
		}
	}
}

func TestBadGlobHasAPosition(t *testing.T) {
	dir := realTempDir(t)
	_, err := compileIn(t, dir, "version: 1\nfilesystem:\n  deny_read: [\"**/[a.pem\"]\nmonitor: {mode: off, exec: [\"/usr/bin/[x\"]}\n")
	if err == nil {
		t.Fatal("bad globs compiled")
	}
	for _, want := range []string{"cordon.yaml:3:", "filesystem.deny_read: bad glob", "cordon.yaml:4:", "monitor.exec: bad glob"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("want %q in %v", want, err)
		}
	}
}
