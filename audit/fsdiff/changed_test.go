package fsdiff

import (
	"context"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestDiffChangedEqualsWalk: DiffChanged at the paths a change set names gives the
// result a walk of both trees gives (a baseline of before, compared with after).
func TestDiffChangedEqualsWalk(t *testing.T) {
	before := map[string]string{
		"a.txt": "one\ntwo\n", "keep.txt": "k\n", "gone.txt": "g\n", "mv.txt": "moved content\n",
		"tree/x": "x\n", "tree/sub/y": "y\n", "dir2file/z": "z\n", "file2dir": "f\n",
		"m/kept": "kept\n", "m/old": "o\n", "x.sh": "#!/bin/sh\n",
		"sub/.git/config": "[core]\n", "sub/.git/index": "i", ".git/HEAD": "ref: refs/heads/main\n",
		"cache/c": "c\n", "touched.txt": "t\n",
	}
	changed := []ChangedPath{
		{Path: ".git/HEAD", Deep: true},
		{Path: "a.txt", Deep: true},
		{Path: "bin.dat", Deep: true},
		{Path: "cache/c", Deep: true},
		{Path: "dir2file", Deep: true},
		{Path: "file2dir", Deep: true},
		{Path: "file2dir/n", Deep: true},
		{Path: "gone.txt", Deep: true},
		{Path: "keep.txt", Deep: true}, // copied up, unchanged
		{Path: "m"},
		{Path: "m/new", Deep: true},
		{Path: "m/old", Deep: true},
		{Path: "mv.txt", Deep: true},
		{Path: "newdir"},
		{Path: "newdir/moved.txt", Deep: true},
		{Path: "newempty"},
		{Path: "touched.txt", Deep: true},
		{Path: "sub"},
		{Path: "sub/.git"},
		{Path: "sub/.git/config", Deep: true},
		{Path: "tree", Deep: true},
		{Path: "x.sh", Deep: true},
	}
	for _, gitDir := range []bool{false, true} {
		w := newWS(t, before)
		after := t.TempDir()
		if out, err := exec.Command("cp", "-a", w.dir+"/.", after).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v: %s", err, out)
		}
		a := ws{t, after}
		a.write("a.txt", "one\nthree\n")
		a.write("bin.dat", "\x00\x01bin")
		a.write("cache/c", "changed\n")
		a.do(os.RemoveAll, "dir2file")
		a.write("dir2file", "now a file\n")
		a.do(os.Remove, "file2dir")
		a.write("file2dir/n", "n\n")
		a.do(os.Remove, "gone.txt")
		a.write("m/new", "new\n")
		a.do(os.Remove, "m/old")
		a.do(os.Remove, "mv.txt")
		a.write("newdir/moved.txt", "moved content\n")
		a.write("sub/.git/config", "[core]\n\thooksPath = /tmp\n")
		a.do(os.RemoveAll, "tree")
		a.write(".git/HEAD", "ref: refs/heads/other\n")
		a.do(func(p string) error { return os.Chmod(p, 0o755) }, "x.sh")
		// Metadata only: a new empty directory, a directory's mode, an mtime, an
		// extended attribute.
		a.do(func(p string) error { return os.Mkdir(p, 0o700) }, "newempty")
		a.do(func(p string) error { return os.Chmod(p, 0o750) }, "m")
		past := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
		a.do(func(p string) error { return os.Chtimes(p, past, past) }, "touched.txt")
		setxattr(t, a, "a.txt", "user.x", "1")
		opts := Options{Exclude: []string{"cache"}, GitDir: gitDir, noGitIndex: true}

		ctx := context.Background()
		tr, err := New(ctx, w.dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		want, err := tr.DiffAt(ctx, after)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DiffChanged(ctx, w.dir, after, changed, opts)
		if err != nil {
			t.Fatal(err)
		}
		if len(want.Changes) < 10 {
			t.Fatalf("gitDir %v: the walk found only %d changes: %+v", gitDir, len(want.Changes), want.Changes)
		}
		if !reflect.DeepEqual(got.Changes, want.Changes) || string(got.Patch) != string(want.Patch) {
			t.Errorf("gitDir %v: DiffChanged differs from the walk\nwalk:    %+v\nchanged: %+v\n%s\n----\n%s",
				gitDir, want.Changes, got.Changes, want.Patch, got.Patch)
		}
		var meta []string
		for _, c := range got.Changes {
			if c.Kind == Dir || c.Op == Touched || len(c.Xattrs) > 0 {
				meta = append(meta, c.Op.String()+" "+c.Path)
			}
		}
		if wantMeta := "modified a.txt; modified m; added newempty; touched touched.txt"; strings.Join(meta, "; ") != wantMeta {
			t.Errorf("gitDir %v: metadata changes %q, want %q", gitDir, meta, wantMeta)
		}
		if got.Scan.Files >= want.Scan.Files {
			t.Errorf("gitDir %v: DiffChanged read %d entries, the walk %d", gitDir, got.Scan.Files, want.Scan.Files)
		}
	}
}

// TestDiffChangedSkipsWhatAWalkSkips: paths under .git (without GitDir), under
// .git/objects (with it) and excluded ones never appear; a path below a link is not
// reached.
func TestDiffChangedSkipsWhatAWalkSkips(t *testing.T) {
	w := newWS(t, map[string]string{"real/f": "f\n"})
	after := t.TempDir()
	a := ws{t, after}
	a.write(".git/objects/ab/cd", "obj")
	a.write(".git/config", "[core]\n")
	a.write("excl/f", "f\n")
	a.write("real/f", "f\n")
	if err := os.Symlink("real", a.path("link")); err != nil {
		t.Fatal(err)
	}
	changed := []ChangedPath{{Path: ".git/config"}, {Path: ".git/objects/ab/cd"}, {Path: "excl/f"}, {Path: "link/f"}, {Path: "../up"}}
	for _, gitDir := range []bool{false, true} {
		res, err := DiffChanged(context.Background(), w.dir, after, changed, Options{Exclude: []string{"excl"}, GitDir: gitDir})
		if err != nil {
			t.Fatal(err)
		}
		var paths []string
		for _, c := range res.Changes {
			paths = append(paths, c.Path)
		}
		var want []string
		if gitDir {
			want = []string{".git/config"}
		}
		if !reflect.DeepEqual(paths, want) {
			t.Errorf("gitDir %v: changes %v, want %v (problems %v)", gitDir, paths, want, res.Problems)
		}
	}
}
