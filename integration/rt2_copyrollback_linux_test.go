package integration

import (
	"os"
	"path/filepath"
	"testing"
)

// rt2CopyAtCheckpoint leaves the staged session id with d an exact copy of the
// workspace's (the rollback of `rm -r d` makes it anew, opaque, file by file), then
// takes the named checkpoint c1 there and returns what the sandbox sees of d then.
func rt2CopyAtCheckpoint(w *stageWorld, id string) string {
	w.t.Helper()
	w.exec(id, "rm -r d")
	w.rollback(id, "-1")
	seen := w.exec(id, "ls d; cat d/x")
	if r := w.cordon("", "session", "checkpoint", id, "c1"); r.code != 0 {
		w.t.Fatalf("checkpoint c1: %v", r)
	}
	return seen
}

// TestRT2RollbackToACopysCheckpoint (red team rt2; a documented limit, docs/sessions.md
// "A directory brought back"): at checkpoint c1 the sandbox's d is an opaque
// directory, an exact copy of the workspace's, which the checkpoint skips as no change
// (keeping no copy of it is what keeps a restored directory within the bound). A
// rollback to c1 then shows at d what the workspace holds at the rollback, as for any
// directory the session has not changed: a host edit or removal made after c1 comes
// into the sandbox's view, where the opaque d had hidden it from the sandbox since c1.
// This test holds that behaviour (a change to it changes the documentation); the
// control case (d not a copy at c1) restores what c1 held.
func TestRT2RollbackToACopysCheckpoint(t *testing.T) {
	t.Run("host edit", func(t *testing.T) {
		w := newStageWorld(t)
		id := w.startSession("--stage")
		at := rt2CopyAtCheckpoint(w, id)
		if at != "x\nx\n" {
			t.Fatalf("the sandbox's d at c1: %q", at)
		}
		mustWrite(t, filepath.Join(w.ws, "d", "x"), "host\n")
		mustWrite(t, filepath.Join(w.ws, "d", "new"), "host\n")
		w.rollback(id, "c1")
		if got, want := w.exec(id, "ls d; cat d/x"), "new\nx\nhost\n"; got != want {
			t.Errorf("after rollback to c1 the sandbox's d holds %q; want the workspace's now, %q", got, want)
		}
		if r := w.cordon("", "session", "stop", id); r.code != 0 {
			t.Fatalf("stop: %v", r)
		}
	})
	t.Run("host removal", func(t *testing.T) {
		w := newStageWorld(t)
		id := w.startSession("--stage")
		rt2CopyAtCheckpoint(w, id)
		if err := os.RemoveAll(filepath.Join(w.ws, "d")); err != nil {
			t.Fatal(err)
		}
		w.rollback(id, "c1")
		if got := w.exec(id, "test -e d && echo there || echo gone"); got != "gone\n" {
			t.Errorf("after rollback to c1 the sandbox's d is %q; want gone, as the workspace's", got)
		}
		if r := w.cordon("", "session", "stop", id); r.code != 0 {
			t.Fatalf("stop: %v", r)
		}
	})
	t.Run("control: not a copy", func(t *testing.T) {
		w := newStageWorld(t)
		id := w.startSession("--stage")
		w.exec(id, "rm -r d")
		w.rollback(id, "-1")
		w.exec(id, "echo mine > d/y")
		if r := w.cordon("", "session", "checkpoint", id, "c1"); r.code != 0 {
			t.Fatalf("checkpoint c1: %v", r)
		}
		at := w.exec(id, "ls d; cat d/x")
		mustWrite(t, filepath.Join(w.ws, "d", "x"), "host\n")
		w.rollback(id, "c1")
		if got := w.exec(id, "ls d; cat d/x"); got != at {
			t.Errorf("after rollback to c1 the sandbox's d holds %q; at c1 it held %q", got, at)
		}
		if r := w.cordon("", "session", "stop", id); r.code != 0 {
			t.Fatalf("stop: %v", r)
		}
	})
}

// TestRT2RollbackCopyKeepsLinks (red team rt2): the sandbox makes d anew as an exact
// copy of the workspace's (cp -a) and gives its d/x a second name e/g: one file of two
// names. A write through e/g changes d/x too; a rollback to c1 must restore one file
// of two names (docs/sessions.md: "a rollback restores it so"), as the sandbox had at
// c1. The copy rule once ignored link counts: c1 skipped d as a copy and held e/g
// alone, and the rollback wrote d/x from the workspace and e/g from the checkpoint,
// two files. A file of more than one name is now no copy (sameEntry).
func TestRT2RollbackCopyKeepsLinks(t *testing.T) {
	w := newStageWorld(t)
	id := w.startSession("--stage")
	const links = `stat -c '%i %h' d/x e/g | awk '{print $2} NR==1{i=$1} NR==2{print ($1==i ? "one file" : "two files")}'`
	w.exec(id, "set -e; cp -a d /tmp/s; rm -r d; mkdir d; cp -a /tmp/s/. d/; mkdir e; ln d/x e/g")
	at := w.exec(id, links)
	if at != "2\n2\none file\n" {
		t.Fatalf("d/x and e/g before the checkpoint: %q", at)
	}
	if r := w.cordon("", "session", "checkpoint", id, "c1"); r.code != 0 {
		t.Fatalf("checkpoint c1: %v", r)
	}
	if got := w.exec(id, "echo changed > e/g; cat d/x"); got != "changed\n" {
		t.Fatalf("a write through e/g, d/x: %q", got)
	}
	w.rollback(id, "c1")
	if got := w.exec(id, links); got != at {
		t.Errorf("after rollback to c1, d/x and e/g: %q; at c1: %q", got, at)
	}
	if got := w.exec(id, "echo more >> e/g; cat d/x"); got != "x\nmore\n" {
		t.Errorf("after rollback to c1, a write through e/g leaves d/x %q; at c1 it reached d/x", got)
	}
	if r := w.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatalf("stop: %v", r)
	}
}
