package integration

import "testing"

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
func TestRedMonitorDroppedPathAlerts(t *testing.T) {
	w := filterWorld(t)
	out, alerts := runOpens(t, w, "dropped:5000:/etc/shadow")
	wantAlert(t, alerts, out, "dropped page", "", "a call the monitor could not read")
}
