package fsdiff

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
)

// A baseline paced by Hurry (one directory at a time until it is closed) records what
// an unpaced one does, whether Hurry is never closed, closed from the start or closed
// while it reads; the tracker's later scans are not paced; and the golden changes
// diff the same against a paced baseline.
func TestHurryPacesOnlyTheBaseline(t *testing.T) {
	files := map[string]string{}
	for i := range 40 {
		files[fmt.Sprintf("d%d/e%d/f.txt", i%7, i)] = fmt.Sprintf("%d\n", i)
	}
	w := newWS(t, files)
	plain, err := New(context.Background(), w.dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	closedNow := make(chan struct{})
	close(closedNow)
	later := make(chan struct{})
	for name, hurry := range map[string]chan struct{}{"never": make(chan struct{}), "closed": closedNow, "later": later} {
		t.Run(name, func(t *testing.T) {
			if hurry == later {
				go close(later)
			}
			tr, err := New(context.Background(), w.dir, Options{Hurry: hurry})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := len(tr.base.entries), len(plain.base.entries); got != want || got < 40 {
				t.Fatalf("a paced baseline recorded %d entries, an unpaced one %d", got, want)
			}
			for rel, e := range plain.base.entries {
				if got := tr.base.entries[rel]; got == nil || got.key != e.key || got.kind != e.kind {
					t.Errorf("%s: paced %+v, unpaced %+v", rel, got, e)
				}
			}
			if tr.opts.Hurry != nil {
				t.Error("the tracker keeps Hurry: its later scans would be paced")
			}
		})
	}
	for _, tt := range goldenCases {
		t.Run("golden/"+tt.name, func(t *testing.T) {
			gw := newWS(t, tt.before)
			opts := tt.opts
			opts.Hurry = make(chan struct{}) // never closed
			tr, err := New(context.Background(), gw.dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			tt.change(gw)
			res, err := tr.Diff(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata", tt.name+".patch"), res.Patch)
		})
	}
}
