package integration

import (
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/testutil"
)

// TestRedMonitorDevCore (red team): bwrap's --dev makes /dev/core a link to
// /proc/kcore (hidden), and /dev is read-only: an open of /dev/core was kept in the
// kernel's filter and compared as /dev/core. It is read as /proc/kcore.
func TestRedMonitorDevCore(t *testing.T) {
	w := filterWorld(t)
	out, alerts := runOpens(t, w, "r:/dev/core")
	wantAlert(t, alerts, out, "/dev/core", "/proc/kcore", "read of a hidden path")
}

// TestRedMonitorDroppedPathAlerts (red team): a path on a page not faulted in at
// syscall entry is read again at exit; a second thread dropping that page
// (MADV_DONTNEED) after the kernel read it leaves it unreadable there too. Such opens of
// /etc/shadow were counted unresolved, without an alert: thousands of tries made some
// of them unseen. Each is now "a call the monitor could not read".
//
// The drop must land between the kernel's copy and the syscall's exit, which a loaded
// machine with two cores may not schedule in 5000 tries: the attack is repeated (up to
// droppedRounds runs) until it does. Every run must alert on /etc/shadow either way.
func TestRedMonitorDroppedPathAlerts(t *testing.T) {
	const droppedRounds = 6
	w := filterWorld(t)
	var out string
	var alerts []filterAlert
	for round := 0; round < droppedRounds; round++ {
		out, alerts = runOpens(t, w, "dropped:5000:/etc/shadow")
		seen := false
		for _, a := range alerts {
			if a.Category == "a call the monitor could not read" {
				return
			}
			seen = seen || (a.Path == "/etc/shadow" && a.Category == "read of a hidden path")
		}
		if !seen {
			t.Fatalf("round %d: the opens of /etc/shadow raised no alert\nalerts: %+v\nattack output:\n%s", round, alerts, out)
		}
	}
	wantAlert(t, alerts, out, "dropped page", "", "a call the monitor could not read")
}

// TestRedMonitorKillAfterQuietFlood (red team): opens and connects wake the reader only
// at 64 KiB waiting or half a poll after the last wakeup. A workload sends opens the
// profile allows but the kernel's filter cannot keep (unclean paths) to keep the last
// wakeup fresh and the buffer under 64 KiB, then reads a hidden path and exits at
// once: the violation must still be read, logged, and end the run as the monitor's.
func TestRedMonitorKillAfterQuietFlood(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	useBPFRoot(t, w)
	w.contract("version: 1\nmonitor: {mode: required, on_violation: kill}\n")
	w.attacker()
	steps := make([]string, 0, 402)
	for i := 0; i < 400; i++ {
		steps = append(steps, "r:/usr/./lib/os-release") // sent (unclean), allowed
	}
	steps = append(steps, "r:/etc/shadow")
	r := w.cordon("", append([]string{"run", "--", "./attack", "opens"}, steps...)...)
	var alerted, byMonitor bool
	for _, rec := range lastRun(t, w) {
		if rec.Type == "syscall.alert" && strings.Contains(string(rec.Body), `"/etc/shadow"`) {
			alerted = true
		}
		if rec.Type == "run.end" && strings.Contains(string(rec.Body), `"reason":"monitor"`) {
			byMonitor = true
		}
	}
	if !alerted || !byMonitor || r.code != 137 {
		t.Errorf("violation then exit after a quiet flood: alerted %v, run ended by the monitor %v, code %d (want 137); run: %v", alerted, byMonitor, r.code, r)
	}
}
