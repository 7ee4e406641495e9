package integration

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/linux"
)

// TestRT2RollbackDropsXattrsThenApplyStrips: was broken, fixed (a rollback restores
// the attributes of what it writes, and a copy needs the workspace's attributes, not
// none). The workspace's d/x carries an
// extended attribute (a user.* one here; an ACL or file capabilities alike). The
// sandbox removes d and the session rolls the command back: the rollback makes d
// anew and writes d/x without the attribute, and says nothing of it (no problem:
// Rollback returns "what want holds that it cannot restore"). d is then no copy
// (the workspace's d/x had an attribute, the copy none), so the change set the session
// leaves, although every command was rolled back, lands d over the workspace's and
// strips the attribute: apply says it applied d and d/x, exit 0. Rolling back every
// command must leave nothing to land (or a rollback must say what it could not
// restore, and apply must not take the attribute away unannounced).
func TestRT2RollbackDropsXattrsThenApplyStrips(t *testing.T) {
	w := newStageWorld(t)
	x := filepath.Join(w.ws, "d", "x")
	if err := linux.Lsetxattr(x, "user.keep", "1"); err != nil {
		t.Fatalf("setting user.keep on the workspace's d/x: %v", err)
	}
	id := w.startSession("--stage")
	w.exec(id, "rm -r d")
	r := w.cordon("", "session", "rollback", id, "-1")
	if r.code != 0 {
		t.Fatalf("rollback: %v", r)
	}
	told := strings.Contains(r.stdout+r.stderr, "attribute")
	if r := w.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatalf("stop: %v", r)
	}
	a := w.cordon("", "apply", id)
	attrs, err := linux.Llistxattr(x)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(attrs, "user.keep") {
		t.Errorf("after rolling back the only command and applying (%v), the workspace's d/x lost user.keep (the rollback said so: %v)", a, told)
	}
}
