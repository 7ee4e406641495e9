package layer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
)

// TestApplyReadsTheUpperWithoutLinks: a change set read from the upper directory names
// the file d/f; by the time it lands, the sandbox (or whoever else writes the upper)
// has made d a link to a host directory holding f. The host file never lands in the
// workspace: the upper is read through no link, at any component.
func TestApplyReadsTheUpperWithoutLinks(t *testing.T) {
	top := t.TempDir()
	ws, upper, host := filepath.Join(top, "ws"), filepath.Join(top, "upper"), filepath.Join(top, "host")
	for _, d := range []string{ws, filepath.Join(upper, "d"), host} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(host, "f"), []byte("HOST SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(upper, "d", "f"), []byte("staged"), 0o644); err != nil {
		t.Fatal(err)
	}
	l := Landing{Workspace: ws, Upper: upper, Writable: func(string) bool { return true }, UID: -1, GID: -1}
	changes := []Change{{Path: "d", Kind: Dir, Mode: 0o755}, {Path: "d/f", Kind: File, Mode: 0o644, Size: 6}}
	// The swap: d becomes a link to the host directory.
	if err := os.Rename(filepath.Join(upper, "d"), filepath.Join(upper, "d.old")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(host, filepath.Join(upper, "d")); err != nil {
		t.Fatal(err)
	}
	_, err := Apply(l, changes)
	if data, rerr := os.ReadFile(filepath.Join(ws, "d", "f")); rerr == nil && strings.Contains(string(data), "SECRET") {
		t.Fatalf("the host file landed through a link in the upper (Apply: %v)", err)
	}
	if err == nil {
		t.Fatal("Apply succeeded though the staged file could not be read")
	}
}

// TestApplyDirMetaFollowsNoLink: a staged directory d made a link to a host
// directory before Apply: the host directory's user.* attributes are not copied onto
// the workspace's d (the upper's d is opened through no link).
func TestApplyDirMetaFollowsNoLink(t *testing.T) {
	top := t.TempDir()
	ws, upper, host := filepath.Join(top, "ws"), filepath.Join(top, "upper"), filepath.Join(top, "host")
	for _, d := range []string{ws, upper, host} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := linux.Lsetxattr(host, "user.secret", "HOST"); err != nil {
		t.Fatalf("setting a user.* attribute on %s: %v", host, err)
	}
	if err := os.Symlink(host, filepath.Join(upper, "d")); err != nil {
		t.Fatal(err)
	}
	l := Landing{Workspace: ws, Upper: upper, Writable: func(string) bool { return true }, UID: -1, GID: -1}
	_, err := Apply(l, []Change{{Path: "d", Kind: Dir, Mode: 0o755}})
	if v, _ := getxattr(filepath.Join(ws, "d"), "user.secret"); v != "" {
		t.Fatalf("the host directory's attribute landed through a link in the upper (Apply: %v)", err)
	}
	if err == nil {
		t.Fatal("Apply succeeded though the staged directory is a link")
	}
}

// getxattr reads the attribute name of the directory p ("" when it has none).
func getxattr(p, name string) (string, error) {
	top, err := linux.OpenTree(filepath.Dir(p))
	if err != nil {
		return "", err
	}
	defer top.Close()
	return top.Getxattr(filepath.Base(p), name)
}

// TestOpaqueDirRemovedByTheHost: an opaque directory (made where the sandbox had
// removed the workspace's) that the workspace no longer holds is a conflict, whether
// the run's end recorded it (Gone: the host removed it during the run) or did not
// (it was an exact copy then, and the host removed it since); one the workspace still
// holds, unchanged since the start, is not.
func TestOpaqueDirRemovedByTheHost(t *testing.T) {
	top := t.TempDir()
	ws, upper := filepath.Join(top, "ws"), filepath.Join(top, "upper")
	for _, d := range []string{filepath.Join(ws, "kept"), filepath.Join(upper, "d")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	wt, err := linux.OpenTree(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer wt.Close()
	started := StartStamp(ws, time.Now()) - 2*ctimeSlack // the workspace's root changed since
	d := Change{Path: "d", Kind: Dir, Mode: 0o755, Opaque: true}
	if st := EndState(wt, d, started); !st.Gone {
		t.Errorf("EndState of an opaque d the workspace lacks: %+v; want Gone", st)
	}
	l := Landing{Workspace: ws, Upper: upper, Started: started, Writable: func(string) bool { return true }, UID: -1, GID: -1}
	for _, ended := range []map[string]State{nil, {"d": EndState(wt, d, started)}} {
		l.Ended = ended
		if !l.conflict(wt, d) {
			t.Errorf("ended %v: an opaque d the workspace lacks is no conflict", ended)
		}
	}
	kept := Change{Path: "kept", Kind: Dir, Mode: 0o755, Opaque: true}
	l.Started = StartStamp(ws, time.Now()) + 2*ctimeSlack // nothing changed since
	l.Ended = map[string]State{"kept": EndState(wt, kept, l.Started)}
	if l.conflict(wt, kept) {
		t.Error("an opaque directory the workspace holds unchanged is a conflict")
	}
}
