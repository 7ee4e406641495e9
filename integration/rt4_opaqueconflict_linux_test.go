package integration

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRT4OpaqueRenamedToFreshPathFalseConflict (red team rt4): the sandbox makes d
// anew (rm -r d, mkdir d: an opaque directory of the upper directory), puts a file of
// its own in it and renames it to fresh, a path the workspace never held. While the
// session runs, the host adds a file at the workspace's root (an editor saving one
// does as much). layer.EndState takes the opaque fresh as a directory the host
// removed (not there, its nearest directory changed since the start: Gone), and apply
// refuses it as a conflict: "fresh changed in the workspace since the run started",
// although the host never held nor touched fresh. The same directory made with mkdir
// (the control) applies.
func TestRT4OpaqueRenamedToFreshPathFalseConflict(t *testing.T) {
	if os.Getenv("CORDON_RT4") == "" {
		t.Skip("rt4 break, fixed by the lead")
	}
	for _, c := range []struct{ name, script string }{
		{"an opaque directory renamed there", "set -e; rm -r d; mkdir d; echo mine > d/f; mv d fresh"},
		{"control: a directory made there", "set -e; rm -r d; mkdir fresh; echo mine > fresh/f"},
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
			if r.code != 0 {
				t.Fatalf("apply of a directory at a path the host never held failed: %v", r)
			}
			if got := w.read("fresh/f"); got != "mine\n" {
				t.Errorf("fresh/f holds %q after the apply; want the sandbox's %q", got, "mine\n")
			}
		})
	}
}
