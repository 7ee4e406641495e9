package fsdiff

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"
)

// TestGitBaselineStatForgery: the baseline of a git workspace does not read the files
// whose stat data match the index; each way a command could make a change look like
// the file the index vouched for must still show, exactly as against a baseline that
// read every file. A same-size rewrite with its old mtime put back (touch -d) keeps
// size, mtime and inode: only ctime, which user space cannot set, gives it away.
func TestGitBaselineStatForgery(t *testing.T) {
	files := map[string]string{
		"touched.txt": "one two three\n",
		"samesize.go": "package a\n",
		"linked.txt":  "becomes a link\n",
		"mode.sh":     "echo hi\n",
		"renamed.txt": "moves away\n",
		"swapped.txt": "swapped for a copy\n",
		"still.txt":   "untouched\n",
	}
	w := newWS(t, files)
	gitRepo(t, w)
	ctx := context.Background()
	fast, err := New(ctx, w.dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	full, err := New(ctx, w.dir, Options{noGitIndex: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := fast.Baseline().Read; got != 0 {
		t.Fatalf("git baseline read %d files; the index vouches for all", got)
	}
	old := time.Now().Add(-72 * time.Hour)
	// touch -d: same size, then both timestamps put back to an old date.
	w.write("touched.txt", "one TWO three\n")
	w.do(func(p string) error { return os.Chtimes(p, old, old) }, "touched.txt")
	// A same-size edit that restores the mtime the index recorded.
	fi, err := os.Lstat(w.path("samesize.go"))
	if err != nil {
		t.Fatal(err)
	}
	w.write("samesize.go", "package b\n")
	w.do(func(p string) error { return os.Chtimes(p, fi.ModTime(), fi.ModTime()) }, "samesize.go")
	// A file replaced by a link, a mode change, a rename.
	w.do(os.Remove, "linked.txt")
	w.do(func(p string) error { return os.Symlink("still.txt", p) }, "linked.txt")
	w.do(func(p string) error { return os.Chmod(p, 0o755) }, "mode.sh")
	w.do(func(p string) error { return os.Rename(p, w.path("moved.txt")) }, "renamed.txt")
	// Replaced by a new file (another inode) of other content, with the old mtime.
	fi, err = os.Lstat(w.path("swapped.txt"))
	if err != nil {
		t.Fatal(err)
	}
	w.write("swapped.new", "swapped for a COPY\n")
	w.do(func(p string) error { return os.Chtimes(p, fi.ModTime(), fi.ModTime()) }, "swapped.new")
	w.do(func(p string) error { return os.Rename(p, w.path("swapped.txt")) }, "swapped.new")

	a, err := fast.Diff(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := full.Diff(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(a.Patch) != string(b.Patch) {
		t.Errorf("patches differ:\n--- git baseline\n%s\n--- full baseline\n%s", a.Patch, b.Patch)
	}
	want := map[string]Op{
		"touched.txt": Modified, "samesize.go": Modified, "mode.sh": Modified,
		"moved.txt": Renamed, "swapped.txt": Modified,
	}
	got := map[string][]Op{}
	for _, c := range a.Changes {
		got[c.Path] = append(got[c.Path], c.Op)
	}
	for p, op := range want {
		if len(got[p]) != 1 || got[p][0] != op {
			t.Errorf("%s: got %v, want %v", p, got[p], op)
		}
	}
	if ops := got["linked.txt"]; len(ops) != 2 || ops[0] != Deleted || ops[1] != Added {
		t.Errorf("linked.txt: got %v, want deleted then added (a type change)", ops)
	}
	if ops := got["still.txt"]; len(ops) != 0 {
		t.Errorf("still.txt: got %v for an untouched file", ops)
	}
	if len(a.Problems) != 0 {
		t.Errorf("problems: %v", a.Problems)
	}
}

// TestManyDirectories: beyond maxPreOpened subdirectories waiting for their scan, a
// directory is opened from the top by its path, one component at a time; its files are
// seen all the same.
func TestManyDirectories(t *testing.T) {
	files := map[string]string{}
	for i := range 3 * maxPreOpened {
		files[fmt.Sprintf("d%04d/sub/f.txt", i)] = "old\n"
	}
	w := newWS(t, files)
	ctx := context.Background()
	tr, err := New(ctx, w.dir, Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := tr.Baseline().Files; got != len(files) {
		t.Fatalf("baseline has %d files, want %d", got, len(files))
	}
	last := fmt.Sprintf("d%04d/sub/f.txt", 3*maxPreOpened-1)
	w.write(last, "new\n")
	res, err := tr.Diff(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changes) != 1 || res.Changes[0].Path != last || len(res.Problems) != 0 {
		t.Fatalf("changes %+v, problems %v", res.Changes, res.Problems)
	}
}
