package integration

import (
	"path/filepath"
	"strings"
	"testing"
)

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
