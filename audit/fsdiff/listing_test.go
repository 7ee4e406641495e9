package fsdiff

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestDiffGoldenSettled is TestDiffGolden with a baseline taken past the racy window,
// as a direct run's is: the directories the change does not touch are then taken
// from the baseline's listing, and the patch must be the same.
func TestDiffGoldenSettled(t *testing.T) {
	wss := make([]ws, len(goldenCases))
	for i, tt := range goldenCases {
		wss[i] = newWS(t, tt.before)
	}
	time.Sleep(2 * racyWindow)
	for i, tt := range goldenCases {
		t.Run(tt.name, func(t *testing.T) {
			w := wss[i]
			w.t = t
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
		})
	}
}

// TestUnchangedDirectoriesNotListed: a diff lists again the directories whose entries
// changed (and the top), and takes the others' listings from the baseline; what
// changed inside a file of such a directory is still seen, as is every name added,
// removed or renamed elsewhere.
func TestUnchangedDirectoriesNotListed(t *testing.T) {
	w := newWS(t, map[string]string{
		"a/1": "1\n", "b/1": "1\n", "b/2": "2\n", "c/old": "c\n",
		"d/e/f": "f\n", "d/e/g": "g\n", "h/i": "i\n",
	})
	time.Sleep(2 * racyWindow)
	tr, err := New(context.Background(), w.dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := tr.base.listed; got != 7 {
		t.Fatalf("the baseline listed %d directories; want all 7", got)
	}
	w.write("a/new", "n\n")
	w.do(os.Remove, "b/2")
	if err := os.Rename(w.path("c/old"), w.path("c/renamed")); err != nil {
		t.Fatal(err)
	}
	// Rewritten in place and chmodded: d/e's listing and stat key do not move.
	w.write("d/e/f", "changed\n")
	w.do(func(p string) error { return os.Chmod(p, 0o600) }, "h/i")
	res, err := tr.Diff(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range res.Changes {
		got = append(got, c.Op.String()+" "+c.Path)
	}
	want := []string{"added a/new", "deleted b/2", "renamed c/renamed", "modified d/e/f", "modified h/i"}
	if !slices.Equal(got, want) {
		t.Errorf("changes %q; want %q", got, want)
	}
	// ".", a, b and c; not d, d/e or h.
	if got := tr.base.listed; got != 4 {
		t.Errorf("the diff listed %d directories; want 4", got)
	}
}
