package linux

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Tree.Setxattr, Removexattr, Xattrs and Dir.Xattrs act on the entry itself, never
// on what a link names, and Xattrs reads within its bounds.
func TestTreeXattrs(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("f", filepath.Join(dir, "l")); err != nil {
		t.Fatal(err)
	}
	tr, err := OpenTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	for _, a := range []Xattr{{Name: "user.b", Value: "2"}, {Name: "user.a", Value: ""}, {Name: "user.c", Value: strings.Repeat("c", 1000)}} {
		if err := tr.Setxattr("f", a.Name, a.Value); err != nil {
			t.Fatal(err)
		}
	}
	if err := tr.Removexattr("f", "user.b"); err != nil {
		t.Fatal(err)
	}
	if err := tr.Removexattr("f", "user.b"); err != nil {
		t.Errorf("removing an attribute already gone: %v", err)
	}
	want := []Xattr{{Name: "user.a", Value: ""}, {Name: "user.c", Value: strings.Repeat("c", 1000)}}
	got, n, err := tr.Xattrs("f", 8, 1000)
	if err != nil || n != 1000 || !slices.Equal(got, want) {
		t.Errorf("Xattrs: %.60q, %d bytes, %v; want %.60q", got, n, err, want)
	}
	if _, _, err := tr.Xattrs("f", 1, 1<<16); !errors.Is(err, ErrXattrsPastBound) {
		t.Errorf("two attributes read with a bound of one: %v", err)
	}
	if _, n, err := tr.Xattrs("f", 8, 999); !errors.Is(err, ErrXattrsPastBound) || n != 1000 {
		t.Errorf("1000 bytes of values read with a bound of 999: %d, %v", n, err)
	}
	d, err := tr.OpenDir(".")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if got, _, err := d.Xattrs("f", 8, 1<<16); err != nil || !slices.Equal(got, want) {
		t.Errorf("Dir.Xattrs: %.60q %v", got, err)
	}
	// The link itself: the kernel refuses user.* on a link, and none is read through it.
	if err := tr.Setxattr("l", "user.x", "1"); !errors.Is(err, unix.EPERM) {
		t.Errorf("setting user.x on a link: %v, want EPERM (not set on what it names)", err)
	}
	if got, _, err := tr.Xattrs("l", 8, 1<<16); err != nil || len(got) != 0 {
		t.Errorf("the link's attributes: %q %v, want none", got, err)
	}
	if names, err := tr.Listxattr("f"); err != nil || len(names) != 2 {
		t.Errorf("Listxattr: %q %v", names, err)
	}
	if v, err := tr.XattrValue("f", "user.gone"); err != nil || v != nil {
		t.Errorf("XattrValue of none: %q %v, want nil", v, err)
	}
	if v, err := tr.XattrValue("f", "user.a"); err != nil || v == nil || len(v) != 0 {
		t.Errorf("XattrValue of an empty one: %q (nil %v) %v, want empty, not nil", v, v == nil, err)
	}
	sub, err := os.MkdirTemp(dir, "d")
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Setxattr(filepath.Base(sub), "user.d", "1"); err != nil {
		t.Fatal(err)
	}
	sd, err := tr.OpenDir(filepath.Base(sub))
	if err != nil {
		t.Fatal(err)
	}
	defer sd.Close()
	if got, _, err := sd.OwnXattrs(8, 1<<16); err != nil || fmt.Sprint(got) != "[{user.d 1}]" {
		t.Errorf("OwnXattrs: %q %v", got, err)
	}
}
