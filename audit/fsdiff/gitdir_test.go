package fsdiff

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// hugeGitDir is a git directory whose hooks directory holds n entries, made as they
// are listed; it records the largest listing asked for and how many entries it gave.
type hugeGitDir struct {
	n        int
	given    int
	maxAsked int
	whole    bool // a listing of the whole directory was asked for
}

func (g *hugeGitDir) Open(name string) (fs.File, error) {
	switch name {
	case ".git":
		return &fakeDir{g: g, names: []string{"config", "hooks"}}, nil
	case ".git/hooks":
		return &fakeDir{g: g, n: g.n}, nil
	}
	return nil, fs.ErrNotExist
}

func (g *hugeGitDir) Lstat(string) (fs.FileInfo, error) { return nil, fs.ErrNotExist }

type fakeDir struct {
	g     *hugeGitDir
	names []string // a small directory's entries
	n     int      // else: this many hook files
	next  int
}

func (d *fakeDir) Stat() (fs.FileInfo, error) { return fakeInfo{".", true}, nil }
func (d *fakeDir) Read([]byte) (int, error)   { return 0, io.EOF }
func (d *fakeDir) Close() error               { return nil }

func (d *fakeDir) ReadDir(count int) ([]fs.DirEntry, error) {
	if count <= 0 {
		d.g.whole = true
		count = 1 << 30
	}
	d.g.maxAsked = max(d.g.maxAsked, count)
	var out []fs.DirEntry
	for ; len(out) < count; d.next++ {
		switch {
		case d.names != nil && d.next < len(d.names):
			out = append(out, fs.FileInfoToDirEntry(fakeInfo{d.names[d.next], d.names[d.next] == "hooks"}))
		case d.names == nil && d.next < d.n:
			out = append(out, fs.FileInfoToDirEntry(fakeInfo{fmt.Sprintf("hook%08d", d.next), false}))
		default:
			d.g.given += len(out)
			if len(out) == 0 {
				return nil, io.EOF
			}
			return out, nil
		}
	}
	d.g.given += len(out)
	return out, nil
}

type fakeInfo struct {
	name string
	dir  bool
}

func (i fakeInfo) Name() string       { return i.name }
func (i fakeInfo) Size() int64        { return 0 }
func (i fakeInfo) ModTime() time.Time { return time.Time{} }
func (i fakeInfo) IsDir() bool        { return i.dir }
func (i fakeInfo) Sys() any           { return nil }
func (i fakeInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o755
	}
	return 0o755
}

// TestGitDirWalkBounded: the fingerprint of a nested git directory whose hooks
// directory holds two million entries lists at most its bound of them (the smaller of
// maxGitDirEntries and limits.diff.entries), a batch at a time, never the directory
// whole, and says it was truncated.
func TestGitDirWalkBounded(t *testing.T) {
	for _, limit := range []int{maxGitDirEntries, 1000} {
		g := &hugeGitDir{n: 2_000_000}
		var h bytes.Buffer
		fingerprintGitDir(g, ".git", &h, [2]uint64{}, limit)
		if g.whole || g.maxAsked > gitDirBatch {
			t.Errorf("limit %d: listed a directory whole (%v) or %d entries at once; want at most %d", limit, g.whole, g.maxAsked, gitDirBatch)
		}
		if g.given > limit+gitDirBatch {
			t.Errorf("limit %d: %d entries listed", limit, g.given)
		}
		if !strings.HasSuffix(h.String(), "truncated\n") {
			t.Errorf("limit %d: the fingerprint does not say it was truncated", limit)
		}
	}
}

// TestNestedRepoBoundedByEntries: limits.diff.entries bounds the walk of a nested git
// directory (50 hooks under a bound of 20 are not all keyed), and within the bound a
// changed hook changes the nested repository's digest.
func TestNestedRepoBoundedByEntries(t *testing.T) {
	dir := t.TempDir()
	hooks := filepath.Join(dir, "sub", ".git", "hooks")
	if err := os.MkdirAll(hooks, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if err := os.WriteFile(filepath.Join(hooks, fmt.Sprintf("h%02d", i)), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	small, big := Options{MaxEntries: 20}, Options{MaxEntries: 1000}
	before, beforeSmall := nestedRepo(r, "sub/.git", big), nestedRepo(r, "sub/.git", small)
	if err := os.WriteFile(filepath.Join(hooks, "h49"), []byte("#!/bin/sh\nevil\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if after := nestedRepo(r, "sub/.git", big); after.sum == before.sum {
		t.Error("a rewritten hook left the nested repository's digest as it was")
	}
	if beforeSmall.sum == before.sum {
		t.Error("with limits.diff.entries 20 the walk of 50 hooks was not cut short")
	}
}
