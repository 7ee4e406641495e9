package layer

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cordonhq/cordon/internal/linux"
)

// nestedCopy makes, the way a sandbox can with rm, mkdir, cp -a and mv alone, an
// opaque directory d of the upper directory (d replaced: a change) holding an opaque
// subAnew makes d/sub anew through the overlay (opaque: it replaces a whiteout), an
// exact copy of the workspace's (its file z with the workspace's mtime), and returns
// the path of an entry as the sandbox sees it.
func subAnew(t *testing.T, w *overlayWorld) (live func(string) string) {
	t.Helper()
	live = func(p string) string { return filepath.Join(w.live.Path(), p) }
	z, err := os.Lstat(filepath.Join(w.ws, "d/sub/z"))
	if err != nil {
		t.Fatal(err)
	}
	if err := removeAll(w.live, "d/sub", 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(live("d/sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	w.write("d/sub/z", "z\n")
	if err := os.Chtimes(live("d/sub/z"), z.ModTime(), z.ModTime()); err != nil {
		t.Fatal(err)
	}
	return live
}

// d/sub that is an exact copy of the workspace's d/sub.
func nestedCopy(t *testing.T, w *overlayWorld) {
	t.Helper()
	live := subAnew(t, w)
	// Moved aside (an opaque directory of the upper directory only: the overlay
	// renames it, its mark kept), d made anew, and moved back into it.
	if err := os.Rename(live("d/sub"), live("X")); err != nil {
		t.Fatal(err)
	}
	if err := removeAll(w.live, "d", 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(live("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	w.write("d/x", "changed\n")
	if err := os.Rename(live("X"), live("d/sub")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"d", "d/sub"} {
		if v, err := linux.Getxattr(filepath.Join(w.upper, p), xattrOpaque); err != nil || v != "y" {
			t.Fatalf("%s is not an opaque directory of the upper directory (%q, %v): the test tests nothing", p, v, err)
		}
	}
	if data, err := os.ReadFile(live("d/sub/z")); err != nil || string(data) != "z\n" {
		t.Fatalf("the sandbox's d/sub/z: %q %v", data, err)
	}
}

// Attack: a checkpoint skips d/sub (an exact copy) but holds its opaque parent d,
// so the checkpoint over the workspace shows d without sub. A rollback to that
// checkpoint must give back what the sandbox had at it: d/sub/z.
func TestRTCopyNestedCopyInOpaqueDirRollback(t *testing.T) {
	w := newOverlayWorld(t)
	nestedCopy(t, w)
	c1, err := TakeCheckpoint(w.upper, w.ws, filepath.Join(w.stage, "c1"), nil, testMax)
	if err != nil {
		t.Fatal(err)
	}
	w.write("a.txt", "two\n")
	w.rollback(c1)
	data, err := os.ReadFile(filepath.Join(w.live.Path(), "d/sub/z"))
	if err != nil || string(data) != "z\n" {
		t.Errorf("after a rollback to a checkpoint at which d/sub/z held \"z\\n\": %q, %v (the rollback lost a directory the sandbox had)", data, err)
	}
}

// The same change set, applied after the run: the workspace must hold d/sub/z as
// the sandbox saw it, and the change set must account for d/sub (listed, or kept).
func TestRTCopyNestedCopyInOpaqueDirApply(t *testing.T) {
	w := newOverlayWorld(t)
	nestedCopy(t, w)
	s, err := Read(w.upper, w.ws, testMax)
	if err != nil {
		t.Fatal(err)
	}
	wt, err := linux.OpenTree(w.ws)
	if err != nil {
		t.Fatal(err)
	}
	ended, started := map[string]State{}, int64(0)
	for _, c := range s.Changes {
		ended[c.Path] = StateOf(wt, c.Path)
		started = max(started, ended[c.Path].Ctime+ctimeSlack+1)
	}
	wt.Close()
	out, err := Apply(Landing{Workspace: w.ws, Upper: w.upper, Started: started, Ended: ended, Writable: func(string) bool { return true }, UID: -1, GID: -1}, s.Changes)
	if err != nil {
		t.Fatalf("apply: %v (%+v)", err, out)
	}
	for p, want := range map[string]string{"d/x": "changed\n", "d/sub/z": "z\n"} {
		if data, err := os.ReadFile(filepath.Join(w.ws, p)); err != nil || string(data) != want {
			t.Errorf("the landed %s: %q, %v; the sandbox saw %q", p, data, err, want)
		}
	}
	if _, err := os.Lstat(filepath.Join(w.ws, "X")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("X landed: %v", err)
	}
}

// Attack: the workspace's d/x carries a user.* attribute, which apply lands with a
// file and which a sandbox's removal of it (a copied-up file without it) lands too.
// The sandbox removes d and makes it anew, an exact copy but for the attribute (its
// files have none). The readers compare the copy's attributes only, never the
// workspace's: the change set is empty, and apply keeps an attribute the sandbox's
// workspace no longer has.
func TestRTCopyWorkspaceXattrDropped(t *testing.T) {
	w := newOverlayWorld(t)
	if err := linux.Lsetxattr(filepath.Join(w.ws, "d/x"), "user.tag", "v"); err != nil {
		t.Fatalf("no user.* attributes here: %v", err)
	}
	live := func(p string) string { return filepath.Join(w.live.Path(), p) }
	mt := func(p string) os.FileInfo {
		fi, err := os.Lstat(filepath.Join(w.ws, p))
		if err != nil {
			t.Fatal(err)
		}
		return fi
	}
	x, z := mt("d/x"), mt("d/sub/z")
	if err := removeAll(w.live, "d", 0); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"d", "d/sub"} {
		if err := os.Mkdir(live(d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	w.write("d/x", "x\n")
	w.write("d/sub/z", "z\n")
	for p, fi := range map[string]os.FileInfo{"d/x": x, "d/sub/z": z} {
		if err := os.Chtimes(live(p), fi.ModTime(), fi.ModTime()); err != nil {
			t.Fatal(err)
		}
	}
	if v, _ := linux.Getxattr(live("d/x"), "user.tag"); v != "" {
		t.Fatalf("the sandbox still sees user.tag: the test tests nothing")
	}
	s, err := Read(w.upper, w.ws, testMax)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Changes) == 0 {
		if v, _ := linux.Getxattr(filepath.Join(w.ws, "d/x"), "user.tag"); v != "" {
			t.Errorf("the sandbox removed d/x's user.tag (its d/x has none), the change set is empty and the workspace keeps user.tag=%q", v)
		}
	}
}

// Attack: a rollback that restores a removed directory restores its files without
// the workspace's user.* attributes, which the checkpoint over the workspace shows.
// It restores them (restoreAttrs), and the directory is then a copy (sameAttrs): no
// change, nothing for apply to land. Were one not restored, the directory would be
// no copy, and apply would land what the sandbox sees.
func TestRTCopyRollbackDropsXattr(t *testing.T) {
	w := newOverlayWorld(t)
	if err := linux.Lsetxattr(filepath.Join(w.ws, "d/x"), "user.tag", "v"); err != nil {
		t.Fatalf("no user.* attributes here: %v", err)
	}
	c1, err := TakeCheckpoint(w.upper, w.ws, filepath.Join(w.stage, "c1"), nil, testMax)
	if err != nil {
		t.Fatal(err)
	}
	if err := removeAll(w.live, "d", 0); err != nil {
		t.Fatal(err)
	}
	w.rollback(c1)
	if v, _ := linux.Getxattr(filepath.Join(w.live.Path(), "d/x"), "user.tag"); v != "v" {
		t.Errorf("d/x came back with user.tag %q, the workspace's is \"v\"", v)
	}
	s, err := Read(w.upper, w.ws, testMax)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Changes) > 0 {
		t.Errorf("d came back as the workspace holds it, yet the change set is %+v", s.Changes)
	}
}

// Attack: the workspace's L is a link to d; the sandbox replaces L with a directory
// (opaque) and moves into it an opaque L/sub that is an exact copy of the
// workspace's d/sub. Telling a copy must not follow the workspace's link: L/sub is
// compared with the workspace's L/sub (none), so it is listed, and landed.
func TestRTCopyLowerLinkParent(t *testing.T) {
	w := newOverlayWorld(t)
	if err := os.Symlink("d", filepath.Join(w.ws, "L")); err != nil {
		t.Fatal(err)
	}
	live := subAnew(t, w)
	if err := os.Rename(live("d/sub"), live("X")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(live("L")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(live("L"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(live("X"), live("L/sub")); err != nil {
		t.Fatal(err)
	}
	if v, err := linux.Getxattr(filepath.Join(w.upper, "L/sub"), xattrOpaque); err != nil || v != "y" {
		t.Fatalf("L/sub is not opaque (%q, %v): the test tests nothing", v, err)
	}
	s, err := Read(w.upper, w.ws, testMax)
	if err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, c := range s.Changes {
		listed = listed || c.Path == "L/sub/z"
	}
	if !listed {
		t.Errorf("L/sub/z, which the workspace does not hold (L is a link there), is not in the change set: %+v", s.Changes)
	}
}
