package integration

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRT2ApplyCopyResurrectsHostRemoval (red team rt2): at the session's stop the
// sandbox's d is an opaque directory, an exact copy of the workspace's, so no change,
// and the stop records nothing of it. The host then removes the workspace's d. The
// apply that follows must not land the sandbox's d back over that removal: it is a
// conflict (layer.Landing.conflict: an opaque directory the stop did not list, which
// the workspace no longer holds), as it is when d was a change at the stop (the
// control case) or when the host edits a file of d instead (TestRTCopyHostEditAfterStop).
func TestRT2ApplyCopyResurrectsHostRemoval(t *testing.T) {
	for _, c := range []struct{ name, script string }{
		{"an exact copy at stop", "set -e; cp -a d /tmp/s; rm -r d; mkdir d; cp -a /tmp/s/. d/; echo staged > kept.txt"},
		{"control: a change at stop", "set -e; cp -a d /tmp/s; rm -r d; mkdir d; cp -a /tmp/s/. d/; echo y > d/y; echo staged > kept.txt"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newStageWorld(t)
			id := w.startSession("--stage")
			w.exec(id, c.script)
			if r := w.cordon("", "session", "stop", id); r.code != 0 {
				t.Fatalf("stop: %v", r)
			}
			if err := os.RemoveAll(filepath.Join(w.ws, "d")); err != nil {
				t.Fatal(err)
			}
			r := w.cordon("", "apply", id)
			if _, err := os.Lstat(filepath.Join(w.ws, "d")); err == nil {
				t.Errorf("apply (%v) landed d again over the host's removal of it after the stop", r)
			}
			if r.code == 0 {
				t.Errorf("apply over the host's removal of d succeeded without a conflict: %v", r)
			}
		})
	}
}

// TestRT2ApplyOpaqueOverHostRemoval (red team rt2): the sandbox makes d anew (rm -r d,
// mkdir d: an opaque directory of the upper directory, with no overlay origin),
// holding the workspace's d/x again and maybe a file of its own, and the host removes
// the workspace's d while the session runs. The stop must mark d Gone (layer.EndState
// takes an opaque directory as it takes a path with an origin), so that apply finds a
// conflict and lands nothing (docs/audit.md: a changed path "that the host deleted
// meanwhile, is a conflict"), as in the control case (d merged, d/y added).
func TestRT2ApplyOpaqueOverHostRemoval(t *testing.T) {
	for _, c := range []struct{ name, script string }{
		{"an exact copy", "set -e; cp -a d /tmp/s; rm -r d; mkdir d; cp -a /tmp/s/. d/; echo staged > kept.txt"},
		{"a copy and a file of its own", "set -e; cp -a d /tmp/s; rm -r d; mkdir d; cp -a /tmp/s/. d/; echo y > d/y"},
		{"control: d merged", "echo y > d/y"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newStageWorld(t)
			id := w.startSession("--stage")
			w.exec(id, c.script)
			if err := os.RemoveAll(filepath.Join(w.ws, "d")); err != nil {
				t.Fatal(err)
			}
			if r := w.cordon("", "session", "stop", id); r.code != 0 {
				t.Fatalf("stop: %v", r)
			}
			r := w.cordon("", "apply", id)
			if _, err := os.Lstat(filepath.Join(w.ws, "d", "x")); err == nil {
				t.Errorf("apply (%v) landed d/x again over the host's removal of d during the session", r)
			}
			if r.code == 0 {
				t.Errorf("apply over the host's removal of d succeeded without a conflict: %v", r)
			}
		})
	}
}
