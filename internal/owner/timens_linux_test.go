package owner

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/testutil"
)

// TestHelperOwnerSelf is not a test: run with OWNER_TEST_SELF=1 (by
// TestOwnerInAnotherTimeNamespace), it prints the Process it records of itself and
// waits for stdin to close.
func TestHelperOwnerSelf(t *testing.T) {
	if os.Getenv("OWNER_TEST_SELF") != "1" {
		return // a helper process, not a test
	}
	data, _ := json.Marshal(Self())
	fmt.Println(string(data))
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	os.Exit(0)
}

// TestOwnerInAnotherTimeNamespace: a cordon in a time namespace of its own (a boot
// clock a day ahead) records the start time the host reads, so the host judges it
// alive while it runs (a live run's gc once killed it) and gone once it has ended.
func TestOwnerInAnotherTimeNamespace(t *testing.T) {
	testutil.RequireRoot(t)
	if _, err := os.Stat("/proc/self/timens_offsets"); err != nil {
		testutil.Require(t, false, "this kernel has no time namespaces")
	}
	cmd := exec.Command("unshare", "--time", "--boottime", "86400", "--fork", "--", os.Args[0], "-test.run", "^TestHelperOwnerSelf$")
	cmd.Env = append(os.Environ(), "OWNER_TEST_SELF=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the helper's record: %v", err)
	}
	var p Process
	if err := json.Unmarshal([]byte(line), &p); err != nil {
		t.Fatalf("the helper's record %q: %v", line, err)
	}
	if host := linux.ProcessStart(p.PID); p.Start != host {
		t.Errorf("recorded start %d; the host reads %d for pid %d", p.Start, host, p.PID)
	}
	if !p.Alive() {
		t.Fatalf("%+v: a running owner in another time namespace counts as gone", p)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the helper: %v", err)
	}
	if p.Alive() {
		t.Errorf("%+v: an owner that ended counts as alive", p)
	}
}
