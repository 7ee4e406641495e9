package linux

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestUnignoreSignals: a process that inherited signals ignored (here 32 and SIGPIPE,
// set by the shell that starts it) starts its children with none ignored once it has
// called UnignoreSignals.
func TestUnignoreSignals(t *testing.T) {
	if os.Getenv("CORDON_TEST_UNIGNORE") == "1" {
		UnignoreSignals()
		out, err := exec.Command("grep", "SigIgn", "/proc/self/status").Output()
		if err != nil {
			t.Fatal(err)
		}
		os.Stdout.Write(out)
		return
	}
	// bash's trap '' ignores the signal, and the ignore survives exec into the test.
	cmd := exec.Command("bash", "-c", `trap '' PIPE 34; exec "$0" -test.run='^TestUnignoreSignals$' -test.v`, os.Args[0])
	cmd.Env = append(os.Environ(), "CORDON_TEST_UNIGNORE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(string(out), "SigIgn:\t0000000000000000") {
		t.Fatalf("a child after UnignoreSignals: %s; want no signal ignored", out)
	}
}
