package linux

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordonhq/cordon/internal/testutil"
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

// TestListxattrAtListsEveryName covers both tries of ListxattrAt: none, a few names
// (the stack buffer) and more than that buffer holds (listed again into one that
// grows).
func TestListxattrAtListsEveryName(t *testing.T) {
	dir := t.TempDir()
	fd, err := OpenDirPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer CloseFD(fd)
	for _, n := range []int{0, 2, 40} {
		name := fmt.Sprintf("f%d", n)
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		var want []string
		for i := range n {
			a := fmt.Sprintf("user.attribute-number-%02d", i)
			if err := unix.Lsetxattr(p, a, []byte("v"), 0); err != nil {
				testutil.Require(t, false, fmt.Sprintf("user xattrs on the temporary directory's file system (%v)", err))
			}
			want = append(want, a)
		}
		got, err := ListxattrAt(fd, name)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: listed %q; want %q", name, got, want)
		}
	}
	if _, err := ListxattrAt(fd, "absent"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("absent entry: err %v; want not exist", err)
	}
}

// TestLstatatNames checks the names Lstatat passes from its stack buffer and those it
// cannot: an entry, an absent one, and a name with a NUL (refused, never truncated to
// the part before it).
func TestLstatatNames(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a"), []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := OpenDirPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer CloseFD(fd)
	if st, err := Lstatat(fd, "a"); err != nil || st.Size != 3 {
		t.Errorf("a: %+v, %v; want size 3", st, err)
	}
	if _, err := Lstatat(fd, "b"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("b: err %v; want not exist", err)
	}
	if _, err := Lstatat(fd, "a\x00b"); err == nil {
		t.Error("a name with a NUL was stat'ed")
	}
	if _, err := Lstatat(fd, strings.Repeat("x", 300)); err == nil {
		t.Error("a name past NAME_MAX was stat'ed")
	}
}
