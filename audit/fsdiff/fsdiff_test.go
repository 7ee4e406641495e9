package fsdiff

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// ws is a workspace under construction in a test.
type ws struct {
	t   *testing.T
	dir string
}

func newWS(t *testing.T, files map[string]string) ws {
	t.Helper()
	w := ws{t, t.TempDir()}
	for name, content := range files {
		w.write(name, content)
	}
	return w
}

func (w ws) path(name string) string { return filepath.Join(w.dir, filepath.FromSlash(name)) }

func (w ws) write(name, content string) {
	w.t.Helper()
	p := w.path(name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		w.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		w.t.Fatal(err)
	}
}

func (w ws) do(fn func(string) error, name string) {
	w.t.Helper()
	if err := fn(w.path(name)); err != nil {
		w.t.Fatal(err)
	}
}

// goldenCases are workspace changes whose patch is compared with testdata/NAME.patch.
var goldenCases = []struct {
	name   string
	before map[string]string
	change func(w ws)
	opts   Options
}{
	{"create", map[string]string{"keep.txt": "k\n"}, func(w ws) {
		w.write("dir/new.txt", "hello\nworld\n")
	}, Options{}},
	{"edit", map[string]string{"a.txt": "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n"}, func(w ws) {
		w.write("a.txt", "1\n2\n3\n4\nfive\n6\n7\n8\n9\n10\n")
	}, Options{}},
	{"delete", map[string]string{"a.txt": "one\ntwo\n", "b.txt": "b\n"}, func(w ws) {
		w.do(os.Remove, "a.txt")
	}, Options{}},
	{"rename", map[string]string{"old/name.go": "package x\n"}, func(w ws) {
		if err := os.Rename(w.path("old/name.go"), w.path("new.go")); err != nil {
			w.t.Fatal(err)
		}
	}, Options{}},
	{"chmod", map[string]string{"run.sh": "#!/bin/sh\n"}, func(w ws) {
		w.do(func(p string) error { return os.Chmod(p, 0o755) }, "run.sh")
	}, Options{}},
	{"chmod_and_edit", map[string]string{"run.sh": "#!/bin/sh\n"}, func(w ws) {
		w.write("run.sh", "#!/bin/sh\necho hi\n")
		w.do(func(p string) error { return os.Chmod(p, 0o755) }, "run.sh")
	}, Options{}},
	{"binary", map[string]string{"img.bin": "\x00\x01\x02"}, func(w ws) {
		w.write("img.bin", "\x00\x01\x03\x04")
		w.write("new.bin", "MZ\x00\x00")
	}, Options{}},
	{"no_newline", map[string]string{"a.txt": "x\ny"}, func(w ws) {
		w.write("a.txt", "x\nz")
	}, Options{}},
	{"empty_file", nil, func(w ws) { w.write("empty", "") }, Options{}},
	{"symlink", map[string]string{"a.txt": "a\n"}, func(w ws) {
		w.do(func(p string) error { return os.Symlink("/etc/passwd", p) }, "link")
	}, Options{}},
	{"file_to_symlink", map[string]string{"a.txt": "a\n"}, func(w ws) {
		w.do(os.Remove, "a.txt")
		w.do(func(p string) error { return os.Symlink("b.txt", p) }, "a.txt")
	}, Options{}},
	{"quoted_name", nil, func(w ws) { w.write("evil\n+++ b/x", "hi\n") }, Options{}},
	{"large", map[string]string{"big.txt": strings.Repeat("a\n", 20)}, func(w ws) {
		w.write("big.txt", strings.Repeat("b\n", 20))
	}, Options{MaxTextSize: 16}},
	{"over_budget", map[string]string{"a.txt": "0123456789\n", "b.txt": "0123456789\n"}, func(w ws) {
		w.write("a.txt", "changed\n")
		w.write("b.txt", "changed\n")
	}, Options{MaxRetained: 12}},
	{"nested_git_shown_unread", map[string]string{".git/config": "x", "cache/a": "a"}, func(w ws) {
		w.write(".git/config", "changed")
		w.write("sub/.git", "gitdir: /elsewhere\n")
		w.write("cache/b", "b")
	}, Options{Exclude: []string{"cache"}}},
}

func TestDiffGolden(t *testing.T) {
	for _, tt := range goldenCases {
		t.Run(tt.name, func(t *testing.T) {
			w := newWS(t, tt.before)
			tr, err := New(context.Background(), w.dir, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			tt.change(w)
			res, err := tr.Diff(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Problems) > 0 {
				t.Errorf("problems: %q", res.Problems)
			}
			golden(t, filepath.Join("testdata", tt.name+".patch"), res.Patch)
			again, err := tr.Diff(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(again.Changes) != 0 {
				t.Errorf("second diff with no change: got %d changes:\n%s", len(again.Changes), again.Patch)
			}
		})
	}
}

func golden(t *testing.T, file string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("patch mismatch for %s\ngot:\n%s\nwant:\n%s", file, got, want)
	}
}

func TestDiffChanges(t *testing.T) {
	w := newWS(t, map[string]string{"a.txt": "1\n2\n", "gone.txt": "x\n", "mv.txt": "same\n"})
	tr, err := New(context.Background(), w.dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	w.write("a.txt", "1\n2\n3\n")
	w.do(os.Remove, "gone.txt")
	if err := os.Rename(w.path("mv.txt"), w.path("moved.txt")); err != nil {
		t.Fatal(err)
	}
	w.write("bin", "\x00")
	res, err := tr.Diff(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	type short struct {
		op   Op
		path string
		old  string
		kind Kind
		a, d int
	}
	want := []short{
		{Modified, "a.txt", "", Text, 1, 0},
		{Added, "bin", "", Binary, 0, 0},
		{Deleted, "gone.txt", "", Text, 0, 1},
		{Renamed, "moved.txt", "mv.txt", Text, 0, 0},
	}
	if len(res.Changes) != len(want) {
		t.Fatalf("got %d changes, want %d:\n%s", len(res.Changes), len(want), res.Patch)
	}
	for i, c := range res.Changes {
		got := short{c.Op, c.Path, c.OldPath, c.Kind, c.Added, c.Deleted}
		if got != want[i] {
			t.Errorf("change %d: got %+v; want %+v", i, got, want[i])
		}
	}
	if res.Insertions != 1 || res.Deletions != 1 {
		t.Errorf("totals: got +%d -%d; want +1 -1", res.Insertions, res.Deletions)
	}
	if c := res.Changes[1]; c.NewSize != 1 || len(c.NewSHA256) != 64 || c.OldSHA256 != "" {
		t.Errorf("binary change: got size %d sha %q/%q", c.NewSize, c.OldSHA256, c.NewSHA256)
	}
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name    string
		exclude []string
		ok      bool
	}{
		{"none", nil, true},
		{"relative", []string{"node_modules", "a/b"}, true},
		{"absolute", []string{"/tmp"}, false},
		{"dotdot", []string{"../x"}, false},
		{"dot", []string{"."}, false},
		{"empty", []string{""}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Options{Exclude: tt.exclude}.Validate()
			if (err == nil) != tt.ok {
				t.Errorf("Validate(%q) = %v; want ok=%v", tt.exclude, err, tt.ok)
			}
		})
	}
}

func TestNewNotADirectory(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{f, filepath.Join(t.TempDir(), "missing")} {
		if _, err := New(context.Background(), dir, Options{}); err == nil {
			t.Errorf("New(%s): got nil error", dir)
		}
	}
}

func TestDiffCanceled(t *testing.T) {
	w := newWS(t, map[string]string{"a": "a"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := New(ctx, w.dir, Options{}); err == nil {
		t.Error("New with canceled context: got nil error")
	}
}

// TestBudgetShiftIsNoChange rewrites a file with the same content while a new file takes
// its place in the memory budget: the file is then tracked by digest only, which is not
// a change of content (the rewrite moved its mtime: it is touched).
func TestBudgetShiftIsNoChange(t *testing.T) {
	w := newWS(t, map[string]string{"a.txt": "0123456789\n"})
	tr, err := New(context.Background(), w.dir, Options{MaxRetained: 12})
	if err != nil {
		t.Fatal(err)
	}
	w.write("0.txt", "abcdefghij\n") // sorts first, takes the budget
	w.write("a.txt", "0123456789\n")
	res, err := tr.Diff(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changes) != 2 || res.Changes[0].Path != "0.txt" || res.Changes[1].Op != Touched {
		t.Errorf("changes: %+v\n%s", res.Changes, res.Patch)
	}
}
