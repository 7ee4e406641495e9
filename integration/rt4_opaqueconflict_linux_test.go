package integration

import (
	"path/filepath"
	"testing"
)

// TestRT4OpaqueRenamedToFreshPath (red team rt4; a documented limit, docs/sessions.md
// "A directory brought back"): the sandbox makes d anew (rm -r d, mkdir d: an opaque
// directory of the upper directory), puts a file of its own in it and renames it to
// fresh, a path the workspace never held, while the host adds a file at the
// workspace's root. An opaque directory says the workspace held something at its
// path when the sandbox made it; one moved since says nothing of where it was made.
// So layer.EndState takes fresh, missing from the workspace in a directory the host
// changed since the start, for a directory the host removed (the signal that catches
// a real removal, TestRT2ApplyOpaqueOverHostRemoval), and apply reports a conflict: a
// false one, the safe way round, which `apply --force` lands. The same directory made
// with mkdir (the control) applies.
func TestRT4OpaqueRenamedToFreshPath(t *testing.T) {
	for _, c := range []struct {
		name, script string
		conflict     bool
	}{
		{"an opaque directory renamed there", "set -e; rm -r d; mkdir d; echo mine > d/f; mv d fresh", true},
		{"control: a directory made there", "set -e; rm -r d; mkdir fresh; echo mine > fresh/f", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newStageWorld(t)
			id := w.startSession("--stage")
			w.exec(id, c.script)
			mustWrite(t, filepath.Join(w.ws, "hostfile"), "host\n")
			if r := w.cordon("", "session", "stop", id); r.code != 0 {
				t.Fatalf("stop: %v", r)
			}
			r := w.cordon("", "apply", id)
			if conflict := r.code != 0; conflict != c.conflict {
				t.Fatalf("apply: %v; want a conflict %v", r, c.conflict)
			}
			if c.conflict {
				if r := w.cordon("", "apply", "--force", id); r.code != 0 {
					t.Fatalf("apply --force: %v", r)
				}
			}
			if got := w.read("fresh/f"); got != "mine\n" {
				t.Errorf("fresh/f holds %q after the apply; want the sandbox's %q", got, "mine\n")
			}
		})
	}
}
