package fsdiff

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The metadata a host sees and a diff must show: extended attributes, mode, an mtime
// moved alone, empty directories. Each case runs on a plain baseline and on a git
// baseline (the index vouches for content, never for attributes or times).

func setxattr(t *testing.T, w ws, name, attr, value string) {
	t.Helper()
	if err := unix.Lsetxattr(w.path(name), attr, []byte(value), 0); err != nil {
		t.Fatalf("setxattr %s %s: %v", name, attr, err)
	}
}

// metaDiff runs change between a baseline of before and a diff, with and without a
// git baseline, and returns both results.
func metaDiff(t *testing.T, before map[string]string, prepare, change func(ws)) map[string]*Result {
	out := map[string]*Result{}
	for _, withGit := range []bool{false, true} {
		w := newWS(t, before)
		if prepare != nil {
			prepare(w)
		}
		if withGit {
			gitRepo(t, w)
		}
		tr, err := New(context.Background(), w.dir, Options{noGitIndex: !withGit})
		if err != nil {
			t.Fatal(err)
		}
		change(w)
		res := mustDiff(t, tr)
		if again := mustDiff(t, tr); len(again.Changes) != 0 {
			t.Errorf("git %v: second diff with no change: %+v", withGit, again.Changes)
		}
		out[fmt.Sprintf("git=%v", withGit)] = res
	}
	return out
}

func only(t *testing.T, how string, res *Result) Change {
	t.Helper()
	if len(res.Changes) != 1 {
		t.Fatalf("%s: want 1 change, got %+v\n%s", how, res.Changes, res.Patch)
	}
	return res.Changes[0]
}

func TestXattrAddedChangedRemoved(t *testing.T) {
	secret := "value-never-in-the-patch"
	for how, res := range metaDiff(t, map[string]string{"a.txt": "a\n"}, func(w ws) {
		setxattr(t, w, "a.txt", "user.keep", "k")
		setxattr(t, w, "a.txt", "user.change", "old")
		setxattr(t, w, "a.txt", "user.gone", "g")
	}, func(w ws) {
		setxattr(t, w, "a.txt", "user.change", "new-"+secret)
		setxattr(t, w, "a.txt", "user.new", secret)
		if err := unix.Lremovexattr(w.path("a.txt"), "user.gone"); err != nil {
			t.Fatal(err)
		}
	}) {
		c := only(t, how, res)
		if c.Op != Modified || c.OldSHA256 != c.NewSHA256 && c.OldSHA256 != "" {
			t.Errorf("%s: want a metadata-only modification, got %+v", how, c)
		}
		got := map[string]Op{}
		for _, x := range c.Xattrs {
			got[x.Name] = x.Op
		}
		want := map[string]Op{"user.change": Modified, "user.new": Added, "user.gone": Deleted}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: xattr changes %v, want %v", how, got, want)
		}
		for _, line := range []string{"xattr changed user.change (3 bytes", "xattr added user.new (24 bytes", "xattr removed user.gone (1 bytes"} {
			if !bytes.Contains(res.Patch, []byte(line)) {
				t.Errorf("%s: patch lacks %q:\n%s", how, line, res.Patch)
			}
		}
		if bytes.Contains(res.Patch, []byte(secret)) {
			t.Errorf("%s: an attribute's value is in the patch:\n%s", how, res.Patch)
		}
	}
}

// TestXattrOnNewFileAndDir: a new file and a new empty directory show the attributes
// they were created with.
func TestXattrOnNewFileAndDir(t *testing.T) {
	for how, res := range metaDiff(t, map[string]string{"a.txt": "a\n"}, nil, func(w ws) {
		w.write("n.txt", "n\n")
		setxattr(t, w, "n.txt", "user.x", "1")
		w.do(func(p string) error { return os.Chmod(p, 0o755) }, ".") // no entry for the root
		setxattr(t, w, "a.txt", "user.y", "2")
	}) {
		if len(res.Changes) != 2 || res.Changes[1].Path != "n.txt" || len(res.Changes[1].Xattrs) != 1 ||
			res.Changes[1].Xattrs[0].Op != Added || res.Changes[0].Xattrs[0].Name != "user.y" {
			t.Errorf("%s: %+v\n%s", how, res.Changes, res.Patch)
		}
	}
}

// TestXattrBounded: past maxXattrs attributes a file is not itemized, but a change to
// the ones past the bound is still seen.
func TestXattrBounded(t *testing.T) {
	many := func(w ws) {
		for i := range maxXattrs + 8 {
			setxattr(t, w, "a.txt", fmt.Sprintf("user.a%03d", i), "v")
		}
	}
	for how, res := range metaDiff(t, map[string]string{"a.txt": "a\n"}, many, func(w ws) {
		setxattr(t, w, "a.txt", fmt.Sprintf("user.a%03d", maxXattrs+7), "w")
	}) {
		c := only(t, how, res)
		if len(c.Xattrs) != 1 || c.Xattrs[0].Name != "*" || !bytes.Contains(res.Patch, []byte("xattrs changed")) {
			t.Errorf("%s: %+v\n%s", how, c, res.Patch)
		}
	}
}

func TestMtimeOnlyIsTouched(t *testing.T) {
	past := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	future := time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
	for how, res := range metaDiff(t, map[string]string{"old.c": "int a;\n", "new.c": "int b;\n"}, nil, func(w ws) {
		w.do(func(p string) error { return os.Chtimes(p, past, past) }, "old.c")
		w.do(func(p string) error { return os.Chtimes(p, future, future) }, "new.c")
	}) {
		if len(res.Changes) != 2 {
			t.Fatalf("%s: %+v", how, res.Changes)
		}
		for i, want := range []time.Time{future, past} {
			c := res.Changes[i]
			if how == "git=true" {
				// The index's content claim was never read: a write of that content
				// cannot be told from a touch, so it is reported as a rewrite, with
				// its times.
				if c.Op != Modified || !c.NewMtime.Equal(want) {
					t.Errorf("%s: %+v", how, c)
				}
				continue
			}
			if c.Op != Touched || !c.NewMtime.Equal(want) || c.OldMtime.IsZero() || c.Added+c.Deleted != 0 {
				t.Errorf("%s: %+v", how, c)
			}
		}
		if how == "git=false" && !bytes.Contains(res.Patch, []byte("mtime ")) ||
			!bytes.Contains(res.Patch, []byte("2001-02-03T04:05:06Z")) && how == "git=false" {
			t.Errorf("%s: patch lacks the times:\n%s", how, res.Patch)
		}
	}
}

// TestBackdatedEditShowsMtime: content changed and mtime set back (so make skips the
// rebuild) is a modification whose patch says the time went back.
func TestBackdatedEditShowsMtime(t *testing.T) {
	past := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	for how, res := range metaDiff(t, map[string]string{"a.c": "int a;\n"}, nil, func(w ws) {
		w.write("a.c", "int evil;\n")
		w.do(func(p string) error { return os.Chtimes(p, past, past) }, "a.c")
	}) {
		c := only(t, how, res)
		if c.Op != Modified || !c.NewMtime.Equal(past) || !bytes.Contains(res.Patch, []byte("-> 2001-02-03T04:05:06Z")) {
			t.Errorf("%s: %+v\n%s", how, c, res.Patch)
		}
	}
}

func TestModeChanges(t *testing.T) {
	for how, res := range metaDiff(t, map[string]string{"x.sh": "#!/bin/sh\n", "s": "s\n", "d/f": "f\n"}, nil, func(w ws) {
		w.do(func(p string) error { return os.Chmod(p, 0o755) }, "x.sh")
		w.do(func(p string) error { return os.Chmod(p, os.ModeSetuid|0o755) }, "s")
		w.do(func(p string) error { return os.Chmod(p, 0o700) }, "d")
	}) {
		if len(res.Changes) != 3 {
			t.Fatalf("%s: %+v", how, res.Changes)
		}
		want := [][3]any{{"d", uint32(0o040700), Dir}, {"s", uint32(0o104755), Text}, {"x.sh", uint32(0o100755), Text}}
		for i, c := range res.Changes {
			if c.Path != want[i][0] || c.NewMode != want[i][1] || c.Kind != want[i][2] || c.Op != Modified {
				t.Errorf("%s: %+v, want %v", how, c, want[i])
			}
		}
		if !bytes.Contains(res.Patch, []byte("new mode 104755")) {
			t.Errorf("%s: patch lacks the set-id mode:\n%s", how, res.Patch)
		}
	}
}

func TestEmptyDirs(t *testing.T) {
	before := map[string]string{"keep/f": "f\n", "full/f": "f\n"}
	for how, res := range metaDiff(t, before, func(w ws) {
		w.do(func(p string) error { return os.MkdirAll(p, 0o755) }, "gone/deeper")
	}, func(w ws) {
		w.do(os.RemoveAll, "gone")
		w.do(func(p string) error { return os.MkdirAll(p, 0o750) }, "new/empty")
		w.write("new/withfile/f", "new\n")
		w.do(os.RemoveAll, "full")
		setxattr(t, w, "keep", "user.d", "x")
	}) {
		var got []string
		for _, c := range res.Changes {
			got = append(got, fmt.Sprintf("%s %s %s", c.Op, c.Kind, c.Path))
		}
		want := []string{"deleted text full/f", "deleted dir gone/deeper", "modified dir keep",
			"added dir new/empty", "added text new/withfile/f"}
		if strings.Join(got, "; ") != strings.Join(want, "; ") {
			t.Errorf("%s:\n got %q\nwant %q\n%s", how, got, want, res.Patch)
		}
		if !bytes.Contains(res.Patch, []byte("new directory mode 040750")) ||
			!bytes.Contains(res.Patch, []byte("deleted directory mode 040755")) {
			t.Errorf("%s: patch:\n%s", how, res.Patch)
		}
	}
}
