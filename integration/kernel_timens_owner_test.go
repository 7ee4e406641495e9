package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
)

// TestRunInAnotherTimeNamespaceSurvivesGC (bwrap): a cordon whose boot clock is a day
// ahead of the host's (`unshare --time --boottime`) records its owner's start time; the
// host's `cordon gc` must judge that run alive, and leave its run directory, sandbox and
// command alone (it once killed the live run: exit 137 in its own log).
func TestRunInAnotherTimeNamespaceSurvivesGC(t *testing.T) {
	testutil.RequireRoot(t)
	_, err := os.Stat("/proc/self/timens_offsets")
	testutil.Require(t, err == nil, "this kernel has no time namespaces")
	w := newWorld(t)
	cmd := exec.Command("unshare", "--time", "--boottime", "86400", "--fork", "--kill-child",
		testutil.Cordon(t), "run", "--", "sh", "-c", "echo up > up.tmp && mv up.tmp up; sleep 600")
	cmd.Dir, cmd.Env = w.ws, w.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })

	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(w.ws, "up")); err == nil {
			break
		}
		select {
		case <-done:
			t.Fatalf("cordon in its own time namespace ended before its command ran: %s", &out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the command did not run within a minute: %s", &out)
		}
	}
	r := w.cordon("", "gc")
	if r.code != 0 {
		t.Fatalf("cordon gc: %v", r)
	}
	if strings.Contains(r.stdout+r.stderr, "removed run") {
		t.Errorf("gc removed the live run of a cordon in another time namespace: %s%s", r.stdout, r.stderr)
	}
	select {
	case <-done:
		t.Fatalf("the run ended when the host's gc ran: %s", &out)
	case <-time.After(2 * time.Second): // the run would have been killed by now
	}
}
