package integration

import "testing"

// TestRT2RollbackRestoresMtime: was broken, fixed. A rollback's result differed from
// the checkpoint in a file's modification time, which make and every build cache
// read: a checkpoint copied an upper file without its modification time, and a
// rollback writes a file with its checkpoint copy's, so a file the sandbox dated 2001
// at checkpoint c1 came back dated when c1 was taken. It matters to the copy rule
// too: a directory the checkpoint held in full although its files were the
// workspace's (not merged with it, or past the budget of telling copies) came back
// with other times, no longer a copy, and its files landed on the workspace as
// changes nobody made. A checkpoint now keeps the time, and a rollback rewrites a
// file whose time alone differs.
func TestRT2RollbackRestoresMtime(t *testing.T) {
	w := newStageWorld(t)
	id := w.startSession("--stage")
	const stamp = "stat -c %Y n.txt a.txt"
	at := w.exec(id, "set -e; echo a > n.txt; touch -d 2001-01-01 n.txt; echo two > a.txt; touch -d 2002-02-02 a.txt; "+stamp)
	if at != "978307200\n1012608000\n" {
		t.Fatalf("the times the sandbox set: %q", at)
	}
	if r := w.cordon("", "session", "checkpoint", id, "c1"); r.code != 0 {
		t.Fatalf("checkpoint c1: %v", r)
	}
	w.exec(id, "echo b > n.txt; echo three > a.txt")
	w.rollback(id, "c1")
	if got := w.exec(id, stamp); got != at {
		t.Errorf("after rollback to c1, the files' times: %q; at c1: %q", got, at)
	}
	if r := w.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatalf("stop: %v", r)
	}
}
