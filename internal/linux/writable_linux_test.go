package linux

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// WritableBelow lists root and what is below it, in a sequential walk's order (a
// directory before what it holds, names sorted), passes over what skip names (a
// directory with all below it) and never walks through a symbolic link.
func TestWritableBelow(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	for _, p := range []string{"b/y", "b/x", "a/deep/z", "skipped/w"} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	var got []string
	// The process may write what it owns; root may write anything. Either way every
	// entry here is listed but those skipped and what the link leads to.
	for _, p := range WritableBelow(root, func(p string) bool { return strings.HasSuffix(p, "/skipped") }) {
		got = append(got, strings.TrimPrefix(p, root))
	}
	want := []string{"", "/a", "/a/deep", "/a/deep/z", "/b", "/b/x", "/b/y", "/link"}
	if !slices.Equal(got, want) {
		t.Errorf("WritableBelow = %q; want %q", got, want)
	}
}
