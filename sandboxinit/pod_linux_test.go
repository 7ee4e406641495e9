package sandboxinit

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/cordonhq/cordon/internal/paths"
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
	// The gate's link and the `cordon` on a gate session's PATH, both in the read-only
	// volume: the link to the gate volume's socket, the binary the copy.
	if got, err := os.Readlink(filepath.Join(dir, filepath.Base(paths.SandboxGate))); err != nil || filepath.Join(dir, got) != filepath.Join(dir, filepath.Base(paths.PodGateDir), filepath.Base(paths.PodGate)) {
		t.Errorf("the gate socket's link points to %q (%v), want the gate volume's socket", got, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, filepath.Base(paths.PodGateDir))); err != nil || !fi.IsDir() {
		t.Errorf("the gate volume's mount point: %v", err)
	}
	bin, err := os.Stat(filepath.Join(dir, filepath.Base(paths.SandboxGateBin), "cordon"))
	if fi, _ := os.Stat(dest); err != nil || !os.SameFile(bin, fi) {
		t.Errorf("bin/cordon is not the installed binary (%v)", err)
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

// install --pin makes each file, empty, with its directories, in the workspace
// volume, leaves one that exists as it is, and refuses a path that leaves it.
func TestInstallPins(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "kept"), []byte("k"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code := InstallMain([]string{filepath.Join(dir, "cordon"), "--pin", ws, "cordon.yaml", "a/b/c.yml", "kept"}); code != 0 {
		t.Fatalf("InstallMain = %d", code)
	}
	for rel, want := range map[string]string{"cordon.yaml": "", "a/b/c.yml": "", "kept": "k"} {
		fi, err := os.Lstat(filepath.Join(ws, rel))
		data, _ := os.ReadFile(filepath.Join(ws, rel))
		if err != nil || !fi.Mode().IsRegular() || string(data) != want {
			t.Errorf("%s: %v, %v, %q; want a regular file holding %q", rel, fi, err, data, want)
		}
	}
	dir2 := t.TempDir()
	if code := InstallMain([]string{filepath.Join(dir2, "cordon"), "--pin", ws, "../escape"}); code != 1 {
		t.Errorf("pinning ../escape: InstallMain = %d, want 1", code)
	}
	if _, err := os.Lstat(filepath.Join(dir, "escape")); err == nil {
		t.Error("../escape was made")
	}
}
