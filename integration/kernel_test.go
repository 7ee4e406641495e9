package integration

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNoPrivilegeToRegain attacks the kernel boundary itself: the sandbox holds no
// capability, cannot make a user namespace to get some back, cannot mount, and sees
// no process of the host.
func TestNoPrivilegeToRegain(t *testing.T) {
	w := newWorld(t)
	r := w.sh("grep -E '^Cap(Eff|Prm|Bnd|Amb):' /proc/self/status; " +
		"unshare -U -r true 2>&1; echo userns=$?; " +
		"mkdir -p /tmp/m && mount -t tmpfs none /tmp/m 2>&1; echo mount=$?; " +
		"ls /proc | grep -c '^[0-9]'; " +
		"kill -0 " + strconv.Itoa(os.Getpid()) + " 2>&1; echo kill=$?")
	for _, set := range []string{"CapEff", "CapPrm", "CapBnd", "CapAmb"} {
		assertContains(t, "capabilities", r.stdout, set+":\t0000000000000000")
	}
	if strings.Contains(r.stdout, "userns=0") || strings.Contains(r.stdout, "mount=0") || strings.Contains(r.stdout, "kill=0") {
		t.Fatalf("the sandbox regained a privilege or reached a host process: %v", r)
	}
	lines := strings.Fields(r.stdout)
	for i, l := range lines {
		if strings.HasPrefix(l, "mount=") && i+1 < len(lines) {
			if n, _ := strconv.Atoi(lines[i+1]); n > 5 {
				t.Errorf("the sandbox sees %d processes; only its own few are in its pid namespace", n)
			}
		}
	}
}

// TestAuditLogNeverVisible: even with the whole home readable, the audit root (and
// cordon's run directories) stay hidden from the sandbox, so it cannot tamper with the
// record of what it did.
func TestAuditLogNeverVisible(t *testing.T) {
	w := newWorld(t)
	if r := w.sh("true"); r.code != 0 { // leaves a log under ~/.local/state/cordon/runs
		t.Fatal(r)
	}
	w.contract("version: 1\nfilesystem:\n  readable: [\"@system\", \"~\"]\n")
	root := filepath.Join(w.home, ".local", "state", "cordon")
	r := w.sh("ls -A " + root + " 2>&1; echo x >> " + root + "/runs/x 2>&1; ls /run/cordon/runs 2>&1; cat " + w.home + "/notes.txt")
	assertContains(t, "home is readable", r.stdout, "home notes")
	if strings.Contains(r.stdout, "runs\n") || strings.Contains(r.stdout, "events.jsonl") {
		t.Fatalf("the audit root is visible inside: %v", r)
	}
	assertContains(t, "audit root", r.stdout, "Permission denied")
	if v := w.cordon("", "audit", "verify", "last"); v.code != 0 {
		t.Errorf("the log was touched: %v", v)
	}
}
