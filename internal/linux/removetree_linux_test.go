package linux

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRemoveTreeDeepWithFewDescriptors: a tree 3000 levels deep (what a sandbox can
// make in its workspace) is removed by a process allowed 64 descriptors, which
// os.RemoveAll could not do; a link in the tree is removed, never followed; a name
// the tree already has for a moved directory is stepped over.
func TestRemoveTreeDeepWithFewDescriptors(t *testing.T) {
	if os.Getenv("CORDON_TEST_REMOVETREE") == "" {
		dir := t.TempDir()
		outside := filepath.Join(t.TempDir(), "kept")
		if err := os.WriteFile(outside, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		top := filepath.Join(dir, "ws")
		if err := os.Mkdir(top, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(top, ".cordon-rm-1"), 0o700); err != nil {
			t.Fatal(err)
		}
		fd, err := unix.Open(top, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3000 {
			if err := unix.Mkdirat(fd, "d", 0o700); err != nil {
				t.Fatal(err)
			}
			if i%500 == 0 {
				if err := unix.Symlinkat(outside, fd, "link"); err != nil {
					t.Fatal(err)
				}
				if err := unix.Symlinkat(filepath.Dir(outside), fd, "dirlink"); err != nil {
					t.Fatal(err)
				}
			}
			next, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY, 0)
			unix.Close(fd)
			if err != nil {
				t.Fatal(err)
			}
			fd = next
		}
		unix.Close(fd)
		cmd := exec.Command(os.Args[0], "-test.run=^TestRemoveTreeDeepWithFewDescriptors$", "-test.v")
		cmd.Env = append(os.Environ(), "CORDON_TEST_REMOVETREE="+top)
		if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "removed") {
			t.Fatalf("RemoveTree under 64 descriptors: %v\n%s", err, out)
		}
		if _, err := os.Stat(top); !os.IsNotExist(err) {
			t.Errorf("the tree is still there: %v", err)
		}
		if data, err := os.ReadFile(outside); err != nil || string(data) != "x" {
			t.Errorf("the file a link in the tree names: %q %v; want it untouched", data, err)
		}
		return
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: 64, Max: 64}); err != nil {
		t.Fatal(err)
	}
	if err := RemoveTree(os.Getenv("CORDON_TEST_REMOVETREE")); err != nil {
		t.Fatal(err)
	}
	t.Log("removed")
}
