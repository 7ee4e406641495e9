package sandboxinit

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestCarve(t *testing.T) {
	root := t.TempDir()
	for _, p := range []string{"a/x", "a/y", "b", "run/cordon/status", "run/cordon/cordon", "run/other"} {
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	j := func(p string) string { return filepath.Join(root, p) }
	read, list := carve([]string{root, "/proc"}, []string{j("run/cordon/status")})
	slices.Sort(read)
	want := []string{"/proc", j("a"), j("b"), j("run/cordon/cordon"), j("run/other")}
	slices.Sort(want)
	if !slices.Equal(read, want) {
		t.Errorf("read = %q\nwant %q", read, want)
	}
	if !slices.Equal(list, []string{root, j("run"), j("run/cordon")}) {
		t.Errorf("list = %q", list)
	}
	if read, _ := carve([]string{j("a")}, []string{j("a")}); len(read) != 0 {
		t.Errorf("a hidden read path must vanish: %q", read)
	}
}
