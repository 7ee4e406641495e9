package fsdiff

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
)

// TestHostileWorkspace plants everything that would make a git-based differ run code or
// block: a filter driver in .gitattributes, hooks, core.fsmonitor, and FIFOs where git
// (or a careless reader) would open them. fsdiff must execute nothing, never open .git,
// never block, and never read through a link that points outside the workspace.
func TestHostileWorkspace(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "pwned")
	cmd := "touch " + marker
	w := newWS(t, map[string]string{
		".gitattributes":              "* filter=evil diff=evil\n",
		".git/config":                 "[core]\n\tfsmonitor = " + cmd + "\n[filter \"evil\"]\n\tclean = " + cmd + "\n\tsmudge = " + cmd + "\n[diff \"evil\"]\n\ttextconv = " + cmd + "\n",
		".git/hooks/pre-commit":       "#!/bin/sh\n" + cmd + "\n",
		".git/hooks/post-checkout":    "#!/bin/sh\n" + cmd + "\n",
		".git/HEAD":                   "ref: refs/heads/main\n",
		"src/main.go":                 "package main\n",
		"vendor/dep/.git/placeholder": "x",
	})
	for _, hook := range []string{".git/hooks/pre-commit", ".git/hooks/post-checkout"} {
		w.do(func(p string) error { return os.Chmod(p, 0o755) }, hook)
	}
	// Opening any of these FIFOs for reading blocks until a writer appears: if fsdiff
	// opened one, the test would hang and time out below.
	for _, fifo := range []string{".git/index", ".git/objects", "vendor/dep/.git/index", "pipe"} {
		w.do(func(p string) error {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			return linux.Mkfifo(p, 0o644)
		}, fifo)
	}
	// A .git file (as in a worktree or submodule) in a subdirectory is skipped too.
	w.write("sub/.git", "gitdir: ../.git\n")
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("TOP SECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w.do(func(p string) error { return os.Symlink(secret, p) }, "escape")
	w.do(func(p string) error { return os.Symlink(filepath.Dir(secret), p) }, "escapedir")

	done := make(chan *Result, 1)
	go func() {
		tr, err := New(context.Background(), w.dir, Options{})
		if err != nil {
			t.Error(err)
			done <- nil
			return
		}
		w.write("src/main.go", "package main\n\nfunc main() {}\n")
		w.write(".git/config", "[core]\n\thooksPath = /tmp\n")
		w.write(".gitattributes", "*.go filter=evil2\n")
		res, err := tr.Diff(context.Background())
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	var res *Result
	select {
	case res = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("fsdiff blocked: it opened a FIFO (.git was read?)")
	}
	if res == nil {
		return
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a command planted in the workspace was executed")
	}
	var paths []string
	for _, c := range res.Changes {
		paths = append(paths, c.Path)
	}
	if got, want := strings.Join(paths, " "), ".gitattributes src/main.go"; got != want {
		t.Errorf("changed paths: got %q; want %q", got, want)
	}
	for _, bad := range []string{"TOP SECRET", "fsmonitor", "hooksPath", "gitdir"} {
		if bytes.Contains(res.Patch, []byte(bad)) {
			t.Errorf("patch contains %q:\n%s", bad, res.Patch)
		}
	}
}

// TestSpecialFilesAndLinks checks that a FIFO in the workspace is recorded without being
// opened and that links are recorded by target, never followed.
func TestSpecialFilesAndLinks(t *testing.T) {
	w := newWS(t, map[string]string{"dir/a": "a\n"})
	tr, err := New(context.Background(), w.dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	w.do(func(p string) error { return linux.Mkfifo(p, 0o600) }, "fifo")
	w.do(func(p string) error { return os.Symlink("dir", p) }, "dirlink")
	res, err := tr.Diff(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := "diff --git a/dirlink b/dirlink\nnew file mode 120000\n--- /dev/null\n+++ b/dirlink\n" +
		"@@ -0,0 +1,1 @@\n+dir\n\\ No newline at end of file\n" +
		"diff --git a/fifo b/fifo\nnew file mode 010600\n"
	if string(res.Patch) != want {
		t.Errorf("patch:\n%s\nwant:\n%s", res.Patch, want)
	}
	if len(res.Changes) != 2 || res.Changes[0].Kind != Symlink || res.Changes[1].Kind != Special {
		t.Errorf("changes: %+v", res.Changes)
	}
}

// TestRacyRewrite rewrites a file with the same size and restores its mtime right after
// the baseline: only ctime and the racy rule can tell, and the change must be seen.
func TestRacyRewrite(t *testing.T) {
	w := newWS(t, map[string]string{"a.txt": "aaaa\n"})
	st, err := os.Stat(w.path("a.txt"))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New(context.Background(), w.dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	w.write("a.txt", "bbbb\n")
	w.do(func(p string) error { return os.Chtimes(p, st.ModTime(), st.ModTime()) }, "a.txt")
	res, err := tr.Diff(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changes) != 1 || res.Changes[0].Op != Modified {
		t.Fatalf("changes: %+v", res.Changes)
	}
}

func TestRereadsOnlyChanged(t *testing.T) {
	files := map[string]string{}
	for i := range 50 {
		files[filepath.Join("d", string(rune('a'+i%26)), "f"+string(rune('a'+i/26)))] = "x\n"
	}
	w := newWS(t, files)
	old := time.Now().Add(-time.Hour) // out of the racy window
	for name := range files {
		w.do(func(p string) error { return os.Chtimes(p, old, old) }, name)
	}
	// ctime is now; pretend the baseline is taken later so nothing is racy.
	opts := Options{now: func() time.Time { return time.Now().Add(time.Hour) }}
	tr, err := New(context.Background(), w.dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := tr.Baseline().Read; got != 50 {
		t.Errorf("baseline read %d files; want 50", got)
	}
	w.write("d/a/fa", "y\n")
	res, err := tr.Diff(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Scan.Read != 1 || res.Scan.Files != 50 || len(res.Changes) != 1 {
		t.Errorf("read %d of %d files, %d changes; want 1 of 50, 1", res.Scan.Read, res.Scan.Files, len(res.Changes))
	}
}
