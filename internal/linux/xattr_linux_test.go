package linux

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestWriteFileLikeCarriesMtimeAndUserXattrs: the landed file has the source's
// mtime and user.* attributes, and nothing of another namespace.
func TestWriteFileLikeCarriesMtimeAndUserXattrs(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	p := filepath.Join(src, "f")
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	past := time.Date(2001, 2, 3, 4, 5, 6, 7, time.UTC)
	if err := os.Chtimes(p, past, past); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"user.a", "user.b", "trusted.t"} {
		if err := unix.Lsetxattr(p, a, []byte(a+"-v"), 0); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := OpenTree(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if _, err := tr.WriteFileLike("f", f, 0o600, -1, -1); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dst, "f"))
	if err != nil || !fi.ModTime().Equal(past) || fi.Mode().Perm() != 0o600 {
		t.Fatalf("landed: %v %v %v", fi.ModTime(), fi.Mode(), err)
	}
	names, err := Llistxattr(filepath.Join(dst, "f"))
	if err != nil || len(names) != 2 || names[0] != "user.a" || names[1] != "user.b" {
		t.Errorf("landed attributes %q, %v; want user.a, user.b", names, err)
	}
}
