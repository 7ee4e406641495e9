package integration

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
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

// TestSessionLogHasNoGaps: a change no command's diff holds — a background process
// of an earlier exec writing between two execs — is still in the log, as an fs.diff
// marked between commands.
func TestSessionLogHasNoGaps(t *testing.T) {
	w := newWorld(t)
	id := w.startSession()
	if r := w.cordon("", "exec", id, "--", "sh", "-c", "(sleep 0.3; echo sneaky > auth.py) >/dev/null 2>&1 &"); r.code != 0 {
		t.Fatal(r)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(filepath.Join(w.ws, "auth.py")); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r := w.cordon("", "exec", id, "--", "true"); r.code != 0 {
		t.Fatal(r)
	}
	if r := w.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatal(r)
	}
	found := false
	for _, ev := range sessionEvents(t, w, id) {
		if string(ev.Type) == "fs.diff" && strings.Contains(string(ev.Body), `"between_commands":true`) && strings.Contains(string(ev.Body), "auth.py") {
			found = true
		}
	}
	if !found {
		t.Fatal("the change made between commands is not in the log")
	}
	if v := w.cordon("", "audit", "verify", id); v.code != 0 {
		t.Fatalf("verify: %v", v)
	}
	show := w.cordon("", "audit", "show", id)
	if show.code != 0 || !strings.Contains(show.stdout, "auth.py") || !strings.Contains(show.stdout, "between commands") {
		t.Fatalf("audit show must show the change between commands: %v", show)
	}
}
