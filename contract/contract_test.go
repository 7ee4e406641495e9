package contract

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testHost is a host whose cwd is dir, whose home is dir's sibling "home", whose
// system files are testRoot's, and whose environment has TERM and a GitHub token.
func testHost(t *testing.T, dir string) Host {
	t.Helper()
	home := filepath.Join(filepath.Dir(dir), "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	return Host{Home: home, Cwd: dir, Root: testRoot(t), Getenv: func(n string) (string, bool) {
		switch n {
		case "TERM":
			return "xterm", true
		case "GITHUB_TOKEN":
			return "ghp_0123456789abcdefghijklmnopqrstuvwxyz", true
		}
		return "", false
	}}
}

// TestBadContracts checks every testdata/bad file against the "# want: LINE:COL: msg"
// comments at its top: each wanted problem is reported, with its position.
func TestBadContracts(t *testing.T) {
	files, _ := filepath.Glob("testdata/bad/*.yaml")
	if len(files) == 0 {
		t.Fatal("no bad contracts")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var wants []string
			for _, line := range strings.Split(string(data), "\n") {
				if w, ok := strings.CutPrefix(line, "# want: "); ok {
					wants = append(wants, w)
				}
			}
			dir := t.TempDir()
			ws := filepath.Join(dir, "c.yaml")
			if err := os.WriteFile(ws, data, 0o644); err != nil {
				t.Fatal(err)
			}
			c, err := Load(ws)
			if err == nil {
				_, err = Compile(c, testHost(t, dir))
			}
			if err == nil {
				t.Fatalf("want errors %q, got none", wants)
			}
			got := err.Error()
			for _, w := range wants {
				if !strings.Contains(got, ws+":"+w) && !strings.Contains(got, w) {
					t.Errorf("missing problem %q in:\n%s", w, got)
				}
			}
			if n := strings.Count(got, "\n") + 1; len(wants) > 1 && n < len(wants) {
				t.Errorf("want %d problems reported together, got %d:\n%s", len(wants), n, got)
			}
		})
	}
}

func TestGoodContracts(t *testing.T) {
	files, _ := filepath.Glob("testdata/good/*.yaml")
	files2, _ := filepath.Glob("../examples/*.yaml")
	for _, f := range append(files, files2...) {
		t.Run(f, func(t *testing.T) {
			c, err := Load(f)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			c.Workspace = Str{Value: dir}
			// Examples may name workspace directories such as build/.
			for _, w := range c.Filesystem.Writable {
				_ = os.MkdirAll(filepath.Join(dir, w.Value), 0o755)
			}
			if _, err := Compile(c, testHost(t, dir)); err != nil {
				t.Fatal(err)
			}
		})
	}
}
