package integration

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/audit"
)

// in returns the world with its commands run in dir, another workspace.
func (w *world) in(dir string) *world {
	w.t.Helper()
	mustMkdir(w.t, dir)
	o := *w
	o.ws = dir
	return &o
}

func TestAuditLastIsThisWorkspaces(t *testing.T) {
	w := newWorld(t)
	other := w.in(filepath.Join(filepath.Dir(w.ws), "other"))
	if r := w.sh("true"); r.code != 0 {
		t.Fatalf("run in ws: %v", r)
	}
	if r := other.sh("true"); r.code != 0 {
		t.Fatalf("run in other: %v", r)
	}
	runs, err := audit.List(w.auditRoot())
	if err != nil || len(runs) != 2 {
		t.Fatalf("runs %+v, %v", runs, err)
	}
	newest, older := runs[0].ID, runs[1].ID // other's, then ws's
	for _, sub := range []string{"show", "verify"} {
		if r := w.cordon("", "audit", sub, "last"); r.code != 0 || !strings.Contains(r.stdout, older) {
			t.Errorf("audit %s last in ws: want %s: %v", sub, older, r)
		}
	}
	if r := w.cordon("", "audit", "verify", "last", "--all"); r.code != 0 || !strings.Contains(r.stdout, newest) {
		t.Errorf("audit verify last --all: want %s: %v", newest, r)
	}
	if r := other.cordon("", "audit", "verify", "last"); r.code != 0 || !strings.Contains(r.stdout, newest) {
		t.Errorf("audit verify last in other: want %s: %v", newest, r)
	}
	none := w.in(filepath.Join(filepath.Dir(w.ws), "none"))
	r := none.cordon("", "audit", "report", "-o", "-", "last")
	if r.code == 0 || !strings.Contains(r.stderr, "--all") || !strings.Contains(r.stderr, "no run of workspace") {
		t.Errorf("last with no run here must fail naming --all: %v", r)
	}
}
