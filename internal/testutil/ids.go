package testutil

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// SleeperWithIDs starts, as root, a process that sleeps with real uid ruid, effective
// (so saved and file system) uid euid, and the same for its gids (setpriv, from
// util-linux), and returns its pid once its ids are set; it is killed and reaped when
// t ends.
func SleeperWithIDs(t testing.TB, ruid, euid, rgid, egid int) int {
	t.Helper()
	RequireRoot(t)
	_, err := exec.LookPath("setpriv")
	Require(t, err == nil, "setpriv (util-linux) is not installed")
	id := strconv.Itoa
	cmd := exec.Command("setpriv", "--ruid", id(ruid), "--euid", id(euid), "--rgid", id(rgid), "--egid", id(egid),
		"--clear-groups", "sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	// Until setpriv has set the ids and exec'd sleep.
	comm := "/proc/" + id(cmd.Process.Pid) + "/comm"
	for deadline := time.Now().Add(10 * time.Second); ; runtime.Gosched() {
		if b, _ := os.ReadFile(comm); string(b) == "sleep\n" {
			return cmd.Process.Pid
		}
		if time.Now().After(deadline) {
			t.Fatal("setpriv did not exec sleep within 10 s")
		}
	}
}
