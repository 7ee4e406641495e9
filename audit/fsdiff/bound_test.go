package fsdiff

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"

	"github.com/cordonhq/cordon/internal/testutil"
	"strings"
	"testing"
	"time"
)

// sparse makes a file of size bytes that holds data only at its end.
func sparse(t *testing.T, p string, size int64, data string) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		testutil.Require(t, false, "no sparse files here: "+err.Error())
	}
	if _, err := f.WriteAt([]byte(data), size-int64(len(data))); err != nil {
		t.Fatal(err)
	}
}

func TestBoundHugeSparseFileNotRead(t *testing.T) {
	w := newWS(t, map[string]string{"keep.txt": "k\n"})
	tr, err := New(context.Background(), w.dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	sparse(t, w.path("huge.img"), 60<<30, "tail")
	start := time.Now()
	res, err := tr.Diff(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("diff of a 60 GiB sparse file took %v; want well under a second", d)
	}
	if res.Scan.Bytes > 1<<20 {
		t.Errorf("read %d bytes; want the file left unread", res.Scan.Bytes)
	}
	if len(res.Changes) != 1 || res.Changes[0].Path != "huge.img" || res.Changes[0].NewSize != 60<<30 {
		t.Fatalf("changes = %+v; want huge.img added with its size", res.Changes)
	}
	if g := res.Gap; g.NotHashed != 1 || len(g.NotHashedPaths) != 1 || g.NotHashedPaths[0] != "huge.img" {
		t.Errorf("gap = %+v; want huge.img named as not hashed", g)
	}
	if !strings.Contains(string(res.Patch), "not hashed: larger than the per-file hash bound") {
		t.Errorf("patch does not say why huge.img was not hashed:\n%s", res.Patch)
	}
	// A rewrite that keeps the size is still a change: the stat data moved.
	sparse(t, w.path("huge.img"), 60<<30, "TAIL")
	res, err = tr.Diff(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changes) != 1 || res.Changes[0].Op != Modified || res.Gap.NotHashed != 1 {
		t.Errorf("after a same-size rewrite: changes %+v gap %+v; want huge.img modified, not hashed", res.Changes, res.Gap)
	}
	res, err = tr.Diff(context.Background())
	if err != nil || len(res.Changes) != 0 {
		t.Errorf("untouched: changes %+v err %v; want none", res.Changes, err)
	}
}

func TestBoundSparseHolesNotRead(t *testing.T) {
	w := newWS(t, nil)
	tr, err := New(context.Background(), w.dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	const size = 64 << 20
	sparse(t, w.path("s.img"), size, "data at the end")
	res, err := tr.Diff(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	h.Write(make([]byte, size-len("data at the end")))
	h.Write([]byte("data at the end"))
	want := hex.EncodeToString(h.Sum(nil))
	if len(res.Changes) != 1 || res.Changes[0].NewSHA256 != want {
		t.Fatalf("changes = %+v; want s.img with digest %s", res.Changes, want)
	}
	// The first MaxTextSize bytes are read as for any file; past them only data.
	if res.Scan.Bytes > DefaultMaxTextSize+1+64<<10 {
		t.Errorf("read %d bytes of a %d-byte file holding 15; want the holes unread", res.Scan.Bytes, size)
	}
	if !res.Gap.Empty() {
		t.Errorf("gap = %+v; want none", res.Gap)
	}
}

func TestBoundEntries(t *testing.T) {
	w := newWS(t, nil)
	tr, err := New(context.Background(), w.dir, Options{MaxEntries: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5000 {
		w.write(fmt.Sprintf("f%05d", i), "")
	}
	res, err := tr.Diff(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	g := res.Gap
	if len(res.Changes) != 1000 || g.Unlisted != 4000 {
		t.Errorf("%d changes, %d unlisted; want 1000 and 4000", len(res.Changes), g.Unlisted)
	}
	if g.Incomplete != 1 || len(g.IncompletePaths) != 1 || g.IncompletePaths[0] != "." {
		t.Errorf("gap = %+v; want the top directory incomplete", g)
	}
	// Nothing changed: the unrecorded files are neither added nor deleted.
	res, err = tr.Diff(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changes) != 0 || res.Gap.Unlisted != 4000 {
		t.Errorf("unchanged tree: %d changes, gap %+v; want none, 4000 unlisted", len(res.Changes), res.Gap)
	}
	// Past the bound no deletion is inferred from what was not seen.
	for i := range 10 {
		w.do(os.Remove, fmt.Sprintf("f%05d", i))
	}
	res, err = tr.Diff(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range res.Changes {
		if c.Op != Deleted {
			t.Errorf("%s %s: want only deletions", c.Op, c.Path)
		}
	}
	if got := len(res.Changes) + res.Gap.NotCompared; got != 20 {
		// 10 deleted, 10 that the bound now reaches, each reported or counted.
		t.Errorf("%d changes + %d not compared; want 20 in all (gap %+v)", len(res.Changes), res.Gap.NotCompared, res.Gap)
	}
}

func TestBoundEntriesSubdirectories(t *testing.T) {
	w := newWS(t, map[string]string{"a/keep": "k\n", "z/keep": "k\n"})
	tr, err := New(context.Background(), w.dir, Options{MaxEntries: 100, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		w.write(fmt.Sprintf("m/d%03d/f", i), "")
	}
	res, err := tr.Diff(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range res.Changes {
		if c.Op != Added || !strings.HasPrefix(c.Path, "m/") {
			t.Errorf("%s %s: want only files added under m/", c.Op, c.Path)
		}
	}
	if res.Gap.Unlisted == 0 || res.Gap.Incomplete == 0 || len(res.Changes) > 100 {
		t.Errorf("%d changes, gap %+v; want at most 100 and the rest counted", len(res.Changes), res.Gap)
	}
}

func TestBoundHashBudget(t *testing.T) {
	w := newWS(t, nil)
	tr, err := New(context.Background(), w.dir, Options{MaxHashBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b", "c"} {
		w.write(n, strings.Repeat(n+"\n", 300<<10))
	}
	res, err := tr.Diff(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Gap.NotHashed != 2 || res.Scan.Bytes > 1<<20 {
		t.Errorf("gap %+v, %d bytes read; want one file hashed, two named", res.Gap, res.Scan.Bytes)
	}
}

func TestBoundPatch(t *testing.T) {
	w := newWS(t, nil)
	tr, err := New(context.Background(), w.dir, Options{MaxPatch: 4096})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		w.write(fmt.Sprintf("f%02d.txt", i), strings.Repeat("a line of text\n", 60))
	}
	res, err := tr.Diff(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Patch) > 4096+64 || len(res.Changes) != 50 || res.Gap.PatchOmitted == 0 {
		t.Errorf("patch %d bytes, %d changes, gap %+v; want at most ~4 KiB, all 50 listed, the rest counted",
			len(res.Patch), len(res.Changes), res.Gap)
	}
}

func TestBoundDeadline(t *testing.T) {
	w := newWS(t, map[string]string{"a/keep": "k\n", "b/keep": "k\n"})
	tr, err := New(context.Background(), w.dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	w.write("a/new", "n\n")
	tr.opts.Timeout = time.Nanosecond
	res, err := tr.Diff(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !res.Gap.TimedOut || res.Gap.Incomplete == 0 {
		t.Errorf("gap = %+v; want the deadline recorded and the tree incomplete", res.Gap)
	}
	for _, c := range res.Changes {
		t.Errorf("%s %s: want nothing inferred past the deadline", c.Op, c.Path)
	}
}
