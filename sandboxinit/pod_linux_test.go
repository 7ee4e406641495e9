package sandboxinit

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// internal install copies the running binary, mode 0555, and never over a file that
// is there already (a symbolic link planted at the destination included).
func TestInstall(t *testing.T) {
	dir := t.TempDir()
	dest := filepath.Join(dir, "cordon")
	if code := InstallMain([]string{dest}); code != 0 {
		t.Fatalf("InstallMain = %d", code)
	}
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(dest)
	if err != nil || !bytes.Equal(got, self) {
		t.Fatalf("the copy differs from the binary (%v)", err)
	}
	if fi, err := os.Stat(dest); err != nil || fi.Mode().Perm() != 0o555 {
		t.Errorf("mode = %v (%v), want 0555", fi.Mode(), err)
	}
	if code := InstallMain([]string{dest}); code != 1 {
		t.Errorf("installing over an existing file: status %d, want 1", code)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(filepath.Join(dir, "elsewhere"), link); err != nil {
		t.Fatal(err)
	}
	if code := InstallMain([]string{link}); code != 1 {
		t.Errorf("installing through a symbolic link: status %d, want 1", code)
	}
	if _, err := os.Stat(filepath.Join(dir, "elsewhere")); err == nil {
		t.Error("the symbolic link's target was created")
	}
	for _, args := range [][]string{nil, {"relative"}, {dest, "extra"}} {
		if code := InstallMain(args); code != 2 {
			t.Errorf("InstallMain(%q) = %d, want 2", args, code)
		}
	}
}
