package integration

import (
	"bufio"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
)

// TestRedPendingFullHidesAnotherRunsAlert (red team): the monitor's
// pending table (calls whose path is on a page not yet faulted in, read again at exit)
// is one 4096-entry map shared by every run on the host. A hostile run with 4200
// threads blocked in open(FIFO) fills it; another run's read of a hidden path, its name
// on such a page, is then sent unreadable. It used to be skipped (no alert anywhere);
// now it is an alert of its own, "a call the monitor could not read": fail closed.
func TestRedPendingFullHidesAnotherRunsAlert(t *testing.T) {
	testutil.RequireRoot(t)
	hostile, victim := newWorld(t), newWorld(t)
	useBPFRoot(t, hostile, victim)
	for _, w := range []*world{hostile, victim} {
		w.contract("version: 1\nmonitor: {mode: required}\n")
		w.attacker()
	}
	// Filling the table takes more threads than the default pids limit allows one run:
	// the hostile contract lifts it (a widening its reviewer would see).
	hostile.contract("version: 1\nmonitor: {mode: required}\nlimits: {pids: unlimited}\n")
	alerted := func(unwatchedToo bool) bool {
		r := victim.cordon("", "run", "--", "./attack", "fresh-open", "/etc/shadow")
		if r.code != 0 {
			t.Fatalf("victim: %v", r)
		}
		for _, rec := range lastRun(t, victim) {
			if rec.Type == "syscall.alert" && strings.Contains(string(rec.Body), `"/etc/shadow"`) {
				return true
			}
			// Fail closed: with the shared table full the open cannot be read, and it is
			// reported as such instead of being skipped.
			if unwatchedToo && rec.Type == "syscall.alert" && strings.Contains(string(rec.Body), `"category":"a call the monitor could not read"`) {
				return true
			}
		}
		return false
	}
	if !alerted(false) {
		t.Fatal("control: no alert for a fresh-page open of /etc/shadow with the table empty")
	}
	cmd := exec.Command(testutil.Cordon(t), "run", "--", "./attack", "pending-fill", "4200", "60")
	cmd.Dir, cmd.Env = hostile.ws, hostile.env
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	filled := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "filled" {
				filled <- true
			}
		}
	}()
	select {
	case <-filled:
	case <-time.After(90 * time.Second):
		t.Fatal("the hostile run never filled the table")
	}
	if !alerted(true) {
		t.Error("a hostile run's blocked opens hid another run's read of /etc/shadow: no syscall.alert in its log")
	}
}
