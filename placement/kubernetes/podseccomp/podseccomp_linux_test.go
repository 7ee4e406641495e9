package podseccomp

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"runtime"
	"slices"
	"syscall"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/cordonhq/cordon/internal/testutil"
)

var update = flag.Bool("update", false, "rewrite testdata/pod-v1.json")

// The profile, as a node's administrator installs it: a change to it (containerd's
// default moved, or cordon's allowance did) shows here, and must come with a new
// version in podspec.DefaultSeccompProfile's name, so that no node runs a Pod under a
// stale file of the same name.
func TestProfileGolden(t *testing.T) {
	testutil.Require(t, runtime.GOARCH == "amd64", "the golden profile is amd64's")
	got, err := Profile()
	if err != nil {
		t.Fatal(err)
	}
	const golden = "testdata/pod-v1.json"
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the profile differs from %s (go test -update, then bump the version in podspec.DefaultSeccompProfile)", golden)
	}
}

// What the profile allows beyond containerd's default is exactly a clone that makes
// a user namespace and a network namespace; the other namespace flags, unshare, setns
// and clone3 stay refused, and anything unlisted fails.
func TestProfileAllowsOnlyNetns(t *testing.T) {
	b, err := Profile()
	if err != nil {
		t.Fatal(err)
	}
	var p specs.LinuxSeccomp
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	if p.DefaultAction != specs.ActErrno {
		t.Errorf("defaultAction %s, want %s", p.DefaultAction, specs.ActErrno)
	}
	var cloneRules []specs.LinuxSyscall
	for _, sc := range p.Syscalls {
		for _, name := range []string{"unshare", "setns", "mount", "clone3"} {
			if slices.Contains(sc.Names, name) && sc.Action == specs.ActAllow {
				t.Errorf("%s is allowed (%+v)", name, sc)
			}
		}
		if slices.Contains(sc.Names, "clone3") && (sc.ErrnoRet == nil || *sc.ErrnoRet != uint(syscall.ENOSYS)) {
			t.Errorf("clone3 does not answer ENOSYS: %+v", sc)
		}
		if slices.Contains(sc.Names, "clone") {
			cloneRules = append(cloneRules, sc)
		}
	}
	if len(cloneRules) != 1 || len(cloneRules[0].Args) != 1 {
		t.Fatalf("clone rules %+v, want one with one argument test", cloneRules)
	}
	a := cloneRules[0].Args[0]
	refused := uint64(syscall.CLONE_NEWNS | syscall.CLONE_NEWUTS | syscall.CLONE_NEWIPC | syscall.CLONE_NEWPID | syscall.CLONE_NEWCGROUP)
	if a.Op != specs.OpMaskedEqual || a.ValueTwo != 0 || a.Value != refused {
		t.Errorf("clone is allowed when %+v; want flags&%#x == 0 (CLONE_NEWUSER and CLONE_NEWNET let through)", a, refused)
	}
}
