package integration

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestCheckJudgesTheRunPlan: check, explain and run compile one plan with the same
// inputs, so a contract run refuses (it grants the audit root, a protected path) is
// one check rejects, for the same reason.
func TestCheckJudgesTheRunPlan(t *testing.T) {
	w := newWorld(t)
	audit := filepath.Join(w.home, "audit")
	mustMkdir(t, audit)
	w.env = append(w.env, "CORDON_AUDIT_DIR="+audit)
	w.contract("version: 1\nfilesystem:\n  readable: [\"@system\", " + strconv.Quote(audit) + "]\n")
	c := w.cordon("", "check")
	r := w.cordon("", "run", "--", "true")
	e := w.cordon("", "explain")
	if c.code != 1 || r.code != 125 || e.code == 0 {
		t.Fatalf("check %d, run %d, explain %d; want 1, 125, refused:\ncheck: %v\nrun: %v", c.code, r.code, e.code, c, r)
	}
	if !strings.Contains(c.stdout, audit) || !strings.Contains(r.stderr, audit) {
		t.Fatalf("check and run must name the same reason:\ncheck: %v\nrun: %v", c, r)
	}
}
