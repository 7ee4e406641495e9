package fsdiff

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/paths"
)

// lyingWorkspace: f.sh holds "good!\n" (what the reviewer saw before the run), the
// index claims the blob of "evil!\n" with f.sh's stat data (planted by an earlier run
// under filesystem.git: commit).
func lyingWorkspace(t *testing.T) (ws, *Tracker) {
	t.Helper()
	w := newWS(t, map[string]string{"f.sh": "evil!\n", "other": "x\n"})
	gitRepo(t, w)
	evil := git(t, w.dir, "rev-parse", "HEAD:f.sh")
	w.write("f.sh", "good!\n")
	time.Sleep(2 * racyWindow)
	lieInIndex(t, w, "f.sh", evil)
	// What the runner does before a sandbox that may write .git starts: from then on
	// the index is never trusted (the lie is only possible after it).
	w.write(".git/"+paths.GitWritten, paths.GitWrittenContent)
	tr, err := New(context.Background(), w.dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := tr.Baseline().Read; got == 0 {
		t.Fatalf("baseline read no file: the index a sandbox could write was trusted")
	}
	return w, tr
}

// TestRedGitLyingIndexChmod: the command writes the claimed content and sets the exec
// bit. The content change good -> evil must show (or be flagged as unverified); today
// only a mode change is reported, with no rewrite notice and no content.
func TestRedGitLyingIndexChmod(t *testing.T) {
	w, tr := lyingWorkspace(t)
	w.write("f.sh", "evil!\n")
	if err := os.Chmod(w.path("f.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	res := mustDiff(t, tr)
	if !bytes.Contains(res.Patch, []byte("rewritten with the content the git index recorded")) &&
		!bytes.Contains(res.Patch, []byte("+evil!")) {
		t.Errorf("content write hidden behind a mode change:\n%s", res.Patch)
	}
}

// TestRedGitLyingIndexRename: the command deletes f.sh and writes the claimed content
// to g.sh. Reported as a pure rename (similarity 100%), the write of "evil!" over
// "good!" is hidden.
func TestRedGitLyingIndexRename(t *testing.T) {
	w, tr := lyingWorkspace(t)
	w.write("g.sh", "evil!\n")
	w.do(os.Remove, "f.sh")
	res := mustDiff(t, tr)
	if !bytes.Contains(res.Patch, []byte("rewritten with the content the git index recorded")) &&
		!bytes.Contains(res.Patch, []byte("+evil!")) {
		t.Errorf("content write hidden behind a rename:\n%s", res.Patch)
	}
}
