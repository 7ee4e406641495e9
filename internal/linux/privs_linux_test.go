package linux

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cordonhq/cordon/internal/testutil"
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
