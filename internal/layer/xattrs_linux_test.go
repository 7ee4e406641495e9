package layer

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/testutil"
)

// setAttr sets the attribute name of p to v, failing the test when it cannot.
func setAttr(t *testing.T, p, name, v string) {
	t.Helper()
	if err := linux.Lsetxattr(p, name, v); err != nil {
		t.Fatalf("setting %s on %s: %v", name, p, err)
	}
}

// attrsOf lists p's attributes as name=value, sorted, the overlay's own aside.
func attrsOf(t *testing.T, p string) []string {
	t.Helper()
	names, err := linux.Llistxattr(p)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		if overlayAttr(n) {
			continue
		}
		v, err := linux.Getxattr(p, n)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, n+"="+v)
	}
	slices.Sort(out)
	return out
}

// changed lists the paths of Read's change set of w.
func changed(t *testing.T, w *overlayWorld) []string {
	t.Helper()
	s, err := Read(w.upper, w.ws, testMax)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range s.Changes {
		got = append(got, c.Path)
	}
	return got
}

// aclUserRead is the value of a system.posix_acl_access attribute that lets uid
// read, besides what mode 0644 grants (the kernel's format: a version, then tag,
// permissions and id of each entry, little-endian).
func aclUserRead(uid uint32) string {
	b := binary.LittleEndian.AppendUint32(nil, 2)
	for _, e := range []struct {
		tag, perm uint16
		id        uint32
	}{{0x01, 6, ^uint32(0)}, {0x02, 4, uid}, {0x04, 4, ^uint32(0)}, {0x10, 4, ^uint32(0)}, {0x20, 4, ^uint32(0)}} {
		b = binary.LittleEndian.AppendUint16(b, e.tag)
		b = binary.LittleEndian.AppendUint16(b, e.perm)
		b = binary.LittleEndian.AppendUint32(b, e.id)
	}
	return string(b)
}

// removedAndRestored gives the workspace's d, d/x and d/sub/z the attributes attrs
// (user.* and, as root, trusted.*), removes d through the overlay, and rolls back to
// a checkpoint taken before.
func removedAndRestored(t *testing.T, attrs map[string]map[string]string) *overlayWorld {
	t.Helper()
	w, problems := removedAndRestoredWith(t, attrs)
	if len(problems) > 0 {
		t.Fatalf("rollback: %v", problems)
	}
	return w
}

// removedAndRestoredWith is removedAndRestored, returning the rollback's problems.
func removedAndRestoredWith(t *testing.T, attrs map[string]map[string]string) (*overlayWorld, []Problem) {
	t.Helper()
	w := newOverlayWorld(t)
	for p, as := range attrs {
		for n, v := range as {
			setAttr(t, filepath.Join(w.ws, p), n, v)
		}
	}
	c1, err := TakeCheckpoint(w.upper, w.ws, filepath.Join(w.stage, "c1"), nil, testMax)
	if err != nil {
		t.Fatal(err)
	}
	if err := removeAll(w.live, "d", 0); err != nil {
		t.Fatal(err)
	}
	_, problems := w.rollbackProblems(c1)
	return w, problems
}

// removedAndRestoredProblems is removedAndRestored, which accepts the problems the
// rollback reports.
func removedAndRestoredProblems(t *testing.T, attrs map[string]map[string]string) *overlayWorld {
	t.Helper()
	w, _ := removedAndRestoredWith(t, attrs)
	return w
}

// TestRollbackSetsNoPrivilege: root's cordon sets no security.* or trusted.*
// attribute during a rollback: it sets attributes by name on an entry the sandbox,
// running on, may have swapped for one of its own since it was written (red team
// rt3: a file capability landed on the sandbox's file). The workspace's d/x with a
// file capability and a trusted.* attribute comes back without them, each a problem,
// and d is a change (not a copy), landed without them.
func TestRollbackSetsNoPrivilege(t *testing.T) {
	testutil.RequireRoot(t)
	capNetRaw := string([]byte{0, 0, 0, 2, 0, 0x20, 0, 0, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}) // cap_net_raw+ep, v2
	w, problems := removedAndRestoredWith(t, map[string]map[string]string{
		"d/x": {"user.keep": "1", "security.capability": capNetRaw, "trusted.t": "2"},
	})
	if got := attrsOf(t, filepath.Join(w.live.Path(), "d/x")); !slices.Equal(got, []string{"user.keep=1"}) {
		t.Errorf("d/x after the rollback holds %q; want user.keep alone", got)
	}
	var named []string
	for _, p := range problems {
		if p.Path == "d/x" && (strings.Contains(p.Why, "security.capability") || strings.Contains(p.Why, "trusted.t")) {
			named = append(named, p.Why)
		}
	}
	if len(named) != 2 {
		t.Errorf("problems %v; want one for security.capability and one for trusted.t", problems)
	}
	if got := changed(t, w); !slices.Contains(got, "d/x") {
		t.Errorf("d/x came back without its privileges and is not a change: %q", got)
	}
}

// A rollback that makes a removed directory anew gives each entry it writes the
// workspace's attributes, names and values (an ACL among them), but for security.*
// and trusted.* ones (TestRollbackSetsNoPrivilege): the directory is then an exact
// copy, no change.
func TestRollbackRestoresXattrs(t *testing.T) {
	attrs := map[string]map[string]string{
		"d":       {"user.dir": "1"},
		"d/x":     {"user.keep": "1", "user.empty": "", "system.posix_acl_access": aclUserRead(1000)},
		"d/sub/z": {"user.big": strings.Repeat("v", 4000)},
	}
	w := removedAndRestored(t, attrs)
	for p := range attrs {
		ws, live := attrsOf(t, filepath.Join(w.ws, p)), attrsOf(t, filepath.Join(w.live.Path(), p))
		if !slices.Equal(ws, live) {
			t.Errorf("%s after the rollback holds %.80q, the workspace's %.80q", p, live, ws)
		}
	}
	if got := changed(t, w); len(got) > 0 {
		t.Errorf("d restored with its attributes is a change: %q", got)
	}
}

// A rollback takes away the attributes the sandbox added since the checkpoint and
// gives back those it changed or removed, on files whose bytes it left alone.
func TestRollbackUndoesAttributeChanges(t *testing.T) {
	w := newOverlayWorld(t)
	setAttr(t, filepath.Join(w.ws, "a.txt"), "user.a", "ws")
	setAttr(t, filepath.Join(w.ws, "b.txt"), "user.b", "ws")
	c1, err := TakeCheckpoint(w.upper, w.ws, filepath.Join(w.stage, "c1"), nil, testMax)
	if err != nil {
		t.Fatal(err)
	}
	live := func(p string) string { return filepath.Join(w.live.Path(), p) }
	setAttr(t, live("a.txt"), "user.a", "sandbox")
	setAttr(t, live("a.txt"), "user.new", "1")
	if err := linux.Lremovexattr(live("b.txt"), "user.b"); err != nil {
		t.Fatal(err)
	}
	changedPaths := w.rollback(c1)
	for p, want := range map[string][]string{"a.txt": {"user.a=ws"}, "b.txt": {"user.b=ws"}} {
		if got := attrsOf(t, live(p)); !slices.Equal(got, want) {
			t.Errorf("%s after the rollback: %q, want %q", p, got, want)
		}
		if !slices.Contains(changedPaths, p) {
			t.Errorf("the rollback restored %s's attributes but does not say it changed it: %q", p, changedPaths)
		}
	}
}

// An entry of more attributes than a rollback reads keeps none of them, and the
// rollback says so; the directory is then no copy, and is listed.
func TestRollbackPastTheAttributeBound(t *testing.T) {
	w := newOverlayWorld(t)
	for i := range xattrNamesMax + 1 {
		setAttr(t, filepath.Join(w.ws, "d/x"), fmt.Sprintf("user.a%d", i), "1")
	}
	c1, err := TakeCheckpoint(w.upper, w.ws, filepath.Join(w.stage, "c1"), nil, testMax)
	if err != nil {
		t.Fatal(err)
	}
	if err := removeAll(w.live, "d", 0); err != nil {
		t.Fatal(err)
	}
	top, ws := w.open(c1.Dir), w.open(w.ws)
	view, err := linux.NewOverlayView(top, ws)
	if err != nil {
		t.Fatal(err)
	}
	defer view.Close()
	want, err := linux.TreeOf(view)
	if err != nil {
		t.Fatal(err)
	}
	defer want.Close()
	now, _ := UpperPaths(w.upper, w.ws, testMax)
	then, _ := UpperPaths(c1.Dir, w.ws, testMax)
	_, problems, err := Rollback(w.live, want, append(now, then...), nil, -1, -1, testMax)
	if err != nil {
		t.Fatal(err)
	}
	told := false
	for _, p := range problems {
		told = told || p.Path == "d/x" && strings.Contains(p.Why, "extended attributes not restored")
	}
	if !told {
		t.Errorf("d/x's %d attributes, past the bound, not restored, and the problems are %+v", xattrNamesMax+1, problems)
	}
	if got := changed(t, w); !slices.Contains(got, "d/x") {
		t.Errorf("d/x came back without its attributes and is not in the change set: %q", got)
	}
}

// The copy rule compares attributes: an upper entry is a copy only with the
// workspace entry's, names and values (the overlay's opaque mark aside).
func TestCopyComparesAttributes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ws, up map[string]string // d/x's attributes in the workspace, and set behind the overlay on the upper copy
		copy   bool
	}{
		{"none", nil, nil, true},
		{"same", map[string]string{"user.a": "1", "user.b": "2"}, nil, true},
		{"a trusted one, not restored", map[string]string{"trusted.t": "2"}, nil, false},
		{"other value", map[string]string{"user.a": "1"}, map[string]string{"user.a": "2"}, false},
		{"one more in the copy", map[string]string{"user.a": "1"}, map[string]string{"user.b": "1"}, false},
		{"one more trusted in the copy", nil, map[string]string{"trusted.t": "1"}, false},
		{"an overlay attribute in the copy", nil, map[string]string{xattrOrigin: ""}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := removedAndRestoredProblems(t, map[string]map[string]string{"d/x": tc.ws})
			for n, v := range tc.up {
				setAttr(t, filepath.Join(w.upper, "d/x"), n, v)
			}
			got := changed(t, w)
			if isCopy := len(got) == 0; isCopy != tc.copy {
				t.Errorf("the workspace's d/x %v, the copy's %v besides: a copy %v (changes %q), want %v", tc.ws, tc.up, isCopy, got, tc.copy)
			}
		})
	}
}

// A checkpoint keeps a file's modification time and attributes, and a rollback to
// it gives them back: a file the sandbox dated 2001 at the checkpoint is dated 2001
// after it, whatever it was since (its bytes or its time alone changed).
func TestRollbackRestoresMtimeAndAttrs(t *testing.T) {
	w := newOverlayWorld(t)
	live := func(p string) string { return filepath.Join(w.live.Path(), p) }
	then := time.Date(2001, 1, 1, 0, 0, 0, 123456789, time.UTC)
	for _, p := range []string{"n.txt", "a.txt"} {
		w.write(p, "at c1\n")
		setAttr(t, live(p), "user.c1", p)
		if err := os.Chtimes(live(p), then, then); err != nil {
			t.Fatal(err)
		}
	}
	c1, err := TakeCheckpoint(w.upper, w.ws, filepath.Join(w.stage, "c1"), nil, testMax)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(c1.Dir, "n.txt")); err != nil || !fi.ModTime().Equal(then) {
		t.Errorf("the checkpoint's n.txt: %v %v, want dated %v", fi.ModTime(), err, then)
	}
	w.write("n.txt", "since\n")
	if err := os.Chtimes(live("a.txt"), time.Now(), time.Now()); err != nil {
		t.Fatal(err)
	}
	w.rollback(c1)
	for _, p := range []string{"n.txt", "a.txt"} {
		fi, err := os.Lstat(live(p))
		if err != nil || !fi.ModTime().Equal(then) {
			t.Errorf("%s after the rollback: dated %v (%v), at c1 %v", p, fi.ModTime(), err, then)
		}
		if got := attrsOf(t, live(p)); !slices.Equal(got, []string{"user.c1=" + p}) {
			t.Errorf("%s after the rollback: attributes %q", p, got)
		}
	}
}
