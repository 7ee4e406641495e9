package linux

import (
	"errors"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/testutil"
	"golang.org/x/sys/unix"
)

// TestDropPrivileges: a regular file loses its set-id bits and file capability, and
// what it had is returned; a link (and what it points at) and a missing path are
// left alone.
func TestDropPrivileges(t *testing.T) {
	testutil.RequireRoot(t) // security.capability needs CAP_SETFCAP
	dir := t.TempDir()
	f, target := filepath.Join(dir, "tool"), filepath.Join(dir, "target")
	for _, p := range []string{f, target} {
		if err := os.WriteFile(p, []byte("x"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o755|os.ModeSetuid|os.ModeSetgid); err != nil {
			t.Fatal(err)
		}
	}
	capNetRaw := string([]byte{0, 0, 0, 2, 0, 0x20, 0, 0, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	if err := Lsetxattr(f, XattrCapability, capNetRaw); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("target", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	tr, err := OpenTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	p, err := tr.DropPrivileges("tool")
	if err != nil || p.SetID != 0o6000 || string(p.Capability) != capNetRaw {
		t.Fatalf("DropPrivileges(tool) = %+v, %v; want set-id 6000 and the capability", p, err)
	}
	if st, _ := os.Stat(f); st.Mode().Perm() != 0o755 || st.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
		t.Errorf("tool's mode after: %v", st.Mode())
	}
	if v, _ := Getxattr(f, XattrCapability); v != "" {
		t.Errorf("tool keeps its capability %q", v)
	}
	for _, rel := range []string{"link", "missing"} {
		if p, err := tr.DropPrivileges(rel); err != nil || p.SetID != 0 || p.Capability != nil {
			t.Errorf("DropPrivileges(%s) = %+v, %v; want nothing done", rel, p, err)
		}
	}
	if st, _ := os.Stat(target); st.Mode()&os.ModeSetuid == 0 {
		t.Error("the link's target lost its set-user-ID bit")
	}
}

// TestTreeReachesPastPathMax: a path longer than the kernel takes at once (a sandbox
// can make one) is reached, piece by piece, by the tree's calls: its file loses its
// set-id bits as any other.
func TestTreeReachesPastPathMax(t *testing.T) {
	dir := t.TempDir()
	d, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	rel := ""
	name := strings.Repeat("d", 200)
	for len(rel) < 9000 { // past two pieces
		if err := unix.Mkdirat(d, name, 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(d, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		unix.Close(d)
		if err != nil {
			t.Fatal(err)
		}
		d, rel = next, path.Join(rel, name)
	}
	dd, err := unix.Openat(d, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	unix.Close(d)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Openat(dd, "tool", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o755)
	unix.Close(dd)
	if err != nil {
		t.Fatal(err)
	}
	err = unix.Fchmod(fd, 0o755|unix.S_ISUID)
	unix.Close(fd)
	if err != nil {
		t.Fatal(err)
	}
	rel = path.Join(rel, "tool")
	tr, err := OpenTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if st, err := tr.Lstat(rel); err != nil || st.Mode&unix.S_ISUID == 0 {
		t.Fatalf("Lstat of a %d-byte path: %v, %v; want the set-user-ID file", len(rel), st, err)
	}
	if p, err := tr.DropPrivileges(rel); err != nil || p.SetID != unix.S_ISUID {
		t.Fatalf("DropPrivileges of a %d-byte path: %+v, %v", len(rel), p, err)
	}
	if st, err := tr.Lstat(rel); err != nil || st.Mode&unix.S_ISUID != 0 {
		t.Errorf("after: %v, %v; want the bit gone", st, err)
	}
	// The deep tree goes as t.TempDir's clean-up cannot take it (past PATH_MAX).
	if err := RemoveTree(filepath.Join(dir, name)); err != nil {
		t.Error(err)
	}
}

// TestDropPrivilegesSince: the sweep takes the privileges of every regular file
// changed since the time it is given, at any depth, and leaves older ones; it stops at
// its bound of entries, saying so.
func TestDropPrivilegesSince(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	setuid := func(rel string) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o755|os.ModeSetuid); err != nil {
			t.Fatal(err)
		}
	}
	setuid("old")
	tr, err := OpenTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	st, err := tr.Lstat("old")
	if err != nil {
		t.Fatal(err)
	}
	since := st.Ctim.Nano() + 1 // after old's last change
	for _, rel := range []string{"new", "a/b/.git/deep"} {
		setuid(rel)
		st, _ := tr.Lstat(rel)
		testutil.Require(t, st.Ctim.Nano() >= since, "the file clock did not move between two changes (coarse timestamps)")
	}
	var got []string
	if err := tr.DropPrivilegesSince(".", since, 0, func(rel string, p Privileges) { got = append(got, rel) }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"a/b/.git/deep", "new"}) && !slices.Equal(got, []string{"new", "a/b/.git/deep"}) {
		t.Errorf("swept %q; want new and a/b/.git/deep", got)
	}
	if st, _ := tr.Lstat("old"); st.Mode&unix.S_ISUID == 0 {
		t.Error("old, not changed since, lost its set-user-ID bit")
	}
	if err := tr.DropPrivilegesSince(".", 0, 2, func(string, Privileges) {}); !errors.Is(err, ErrTooMany) {
		t.Errorf("a sweep of 2 entries of a tree of more: %v; want ErrTooMany", err)
	}
}
