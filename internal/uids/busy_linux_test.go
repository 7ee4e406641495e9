package uids

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
)

// TestIDsInUseEveryID: a process whose real uid alone, or effective gid alone, is in
// the range makes that id used.
func TestIDsInUseEveryID(t *testing.T) {
	testutil.RequireRoot(t)
	_, err := exec.LookPath("setpriv")
	testutil.Require(t, err == nil, "setpriv (util-linux) is not installed")
	cmd := exec.Command("setpriv", "--ruid", "70001", "--euid", "70002", "--rgid", "70003", "--egid", "70004",
		"--clear-groups", "sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	comm := "/proc/" + strconv.Itoa(cmd.Process.Pid) + "/comm"
	for deadline := time.Now().Add(10 * time.Second); ; runtime.Gosched() {
		if b, _ := os.ReadFile(comm); string(b) == "sleep\n" {
			break // setpriv has set the ids and exec'd sleep
		}
		if time.Now().After(deadline) {
			t.Fatal("setpriv did not exec sleep within 10 s")
		}
	}
	for _, id := range []int{70001, 70002, 70003, 70004} {
		used, err := idsInUse(Range{Base: id, Count: 1})
		if err != nil {
			t.Fatal(err)
		}
		if !used[id] {
			t.Errorf("id %d, one of a process's, is not in use", id)
		}
	}
	used, err := idsInUse(Range{Base: 70005, Count: 100})
	if err != nil || len(used) != 0 {
		t.Errorf("ids 70005-70104: %v, %v; want none in use", used, err)
	}
}
