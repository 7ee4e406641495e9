package fsdiff

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestGitBlobReadsChargedToHashBudget: the old content a diff reads from the git
// object store (for files the baseline took from the index) is charged to the hash
// bounds as reading the files would have been: past Options.MaxHashBytes (what the
// diff's scan hashed counts) or Options.MaxFileHash a blob is not read, and the change
// is reported by its stat data, in Gap.NotHashed.
func TestGitBlobReadsChargedToHashBudget(t *testing.T) {
	for _, tc := range []struct {
		name       string
		opts       Options
		notHashed  int
		whyInPatch string
	}{
		// 4 changed files of 8 bytes are hashed by the scan (32 bytes): 2,468 bytes
		// are left, two old sides of 1,000.
		{"total", Options{MaxHashBytes: 2500}, 2, unhashedBudget},
		{"per file", Options{MaxFileHash: 999}, 4, unhashedFile},
		{"within both", Options{}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{}
			for i := range 4 {
				files[fmt.Sprintf("f%d.txt", i)] = strings.Repeat(fmt.Sprintf("line %03d\n", i), 112)[:1000]
			}
			w := newWS(t, files)
			gitRepo(t, w)
			time.Sleep(2 * racyWindow)
			tr, err := New(context.Background(), w.dir, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := tr.Baseline().Read; got != 0 {
				t.Fatalf("baseline read %d files; want them all from the index", got)
			}
			for name := range files {
				w.write(name, "changed\n")
			}
			res := mustDiff(t, tr)
			if len(res.Changes) != 4 {
				t.Fatalf("changes %+v; want the 4 files", res.Changes)
			}
			if res.Gap.NotHashed != tc.notHashed {
				t.Errorf("Gap.NotHashed = %d; want %d (blobs read past the hash bounds):\n%s", res.Gap.NotHashed, tc.notHashed, res.Patch)
			}
			if tc.whyInPatch != "" && !strings.Contains(string(res.Patch), tc.whyInPatch) {
				t.Errorf("the patch does not say %q:\n%s", tc.whyInPatch, res.Patch)
			}
		})
	}
}
