package stage

import (
	"os"
	"strings"
	"testing"

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
