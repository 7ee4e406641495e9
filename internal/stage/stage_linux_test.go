package stage

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/testutil"
)

// The stage mounts a tmpfs over Root: run anywhere but in a mount namespace of its
// own, that would hide every run directory of the host. It must refuse first.
func TestStageRefusesTheHostMountNamespace(t *testing.T) {
	testutil.RequireRoot(t)
	before, _ := os.ReadFile("/proc/self/mountinfo")
	err := run(&Spec{UID: 64999, GID: 64999, Argv: []string{"/bin/true"}})
	if err == nil || !strings.Contains(err.Error(), "mount namespace of its own") {
		t.Fatalf("want a refusal, got %v", err)
	}
	after, _ := os.ReadFile("/proc/self/mountinfo")
	if string(before) != string(after) {
		t.Fatal("the stage mounted something in the test's mount namespace")
	}
}

func TestStageRefusesRootAsTheSandboxUID(t *testing.T) {
	testutil.RequireRoot(t)
	if err := run(&Spec{UID: 0, Argv: []string{"/bin/true"}}); err == nil {
		t.Fatal("the stage accepted uid 0")
	}
}

// A source path that meets a symbolic link was swapped since the Plan resolved it:
// staging it would mount whatever the link points to.
func TestCloneRefusesLinks(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	if err := os.Symlink("/etc", filepath.Join(dir, "sub")); err != nil {
		t.Fatal(err)
	}
	if f, err := linux.CloneTree(nil, filepath.Join(dir, "sub", "ssl"), nil); err == nil {
		f.Close()
		t.Fatal("a path through a symbolic link was cloned")
	}
	if f, err := linux.CloneTree(nil, dir, nil); err != nil {
		t.Fatalf("a plain directory: %v", err)
	} else {
		f.Close()
	}
}
