package workspace

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// rtfixFill makes n empty files, per to a directory, below root.
func rtfixFill(t *testing.T, root string, n, per int) {
	t.Helper()
	for i := 0; i < n; i++ {
		d := filepath.Join(root, fmt.Sprintf("d%04d", i/per))
		if i%per == 0 {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		f, err := os.Create(filepath.Join(d, fmt.Sprintf("f%07d", i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
}

// TestRTFixPackOneWideDirectoryLinear: packing N entries reads about as many names
// whether they are in one directory or spread over directories of a thousand. The
// pack read a directory once per 1024 names it packed, so one directory of N names
// was read N/1024 times: a sandbox that made one directory of upload_entries (100000
// by default) empty files made each download of it read ~10M names. The names read,
// every pass counted, are the work: counted, not timed, so a busy machine cannot fail
// it.
func TestRTFixPackOneWideDirectoryLinear(t *testing.T) {
	const n = 60000
	wide, spread := t.TempDir(), t.TempDir()
	rtfixFill(t, wide, n, n)
	rtfixFill(t, spread, n, 1000)
	lim := Limits{Bytes: 1 << 30, Entries: 100_000}
	read := func(dir string) int {
		p := &packer{tw: tar.NewWriter(io.Discard), lim: lim}
		if err := p.pack(dir); err != nil {
			t.Fatal(err)
		}
		if p.stats.Entries != n+n/1000 && p.stats.Entries != n+1 {
			t.Fatalf("packed %d entries of %s", p.stats.Entries, dir)
		}
		return p.read
	}
	s, w := read(spread), read(wide)
	t.Logf("names read packing %d entries: in directories of 1000 %d, in one directory %d", n, s, w)
	// Each directory is read once to count it and at most dirPasses+1 times to pack
	// (a last pass that finds nothing: n a multiple of the batch); the root holds one
	// name, read twice.
	if limit := (dirPasses+2)*n + 2; w > limit {
		t.Errorf("one directory of %d entries: %d names read packing it (%.1f per entry), past %d", n, w, float64(w)/n, limit)
	}
}

// rtfixHeapProbe is a Pack's writer that measures the live heap once, when it is
// first given an entry below depth levels.
type rtfixHeapProbe struct {
	depth int
	live  uint64
}

func (p *rtfixHeapProbe) Write(b []byte) (int, error) {
	if p.live == 0 && bytes.Count(b[:min(len(b), 100)], []byte("d/")) >= p.depth {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		p.live = m.HeapAlloc
	}
	return len(b), nil
}

// TestRTFixPackHoldsBoundedNames: a pack holds one batch of names at every level it
// is below, so a tree of nested directories, each with dirBatch long names, makes it
// hold all of them at the deepest level (the red team measured 9 MiB for 40 levels):
// the bound is lim.Entries names in all (pack_linux.go's dirBatch), not 2×dirBatch.
// This checks that bound holds.
func TestRTFixPackHoldsBoundedNames(t *testing.T) {
	const levels, nameLen = 40, 200
	root := t.TempDir()
	dir := root
	for l := range levels {
		for i := range dirBatch - 1 {
			f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%05d%s", i, strings.Repeat("n", nameLen-5))))
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
		if l < levels-1 {
			dir = filepath.Join(dir, "d") // sorts after the files: packed last
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	base := m.HeapAlloc
	probe := &rtfixHeapProbe{depth: levels - 1}
	if _, _, err := Pack(probe, root, Limits{Bytes: 1 << 30, Entries: 100_000}); err != nil {
		t.Fatal(err)
	}
	held := int64(probe.live) - int64(base)
	bound := int64(levels * dirBatch * (nameLen + 16) * 2) // every name the tree holds (within Entries), twice over
	t.Logf("packing %d levels of %d names of %d bytes: %d KiB live at the deepest (bound %d KiB)", levels, dirBatch, nameLen, held>>10, bound>>10)
	if probe.live == 0 {
		t.Fatal("the deepest level was never packed")
	}
	if held > bound {
		t.Errorf("a pack held %d KiB of names at once, past %d KiB (the tree's %d names)", held>>10, bound>>10, levels*dirBatch)
	}
}
