package workspace

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
)

// rtfixCPU is the CPU time (user and system) the process spends in fn.
func rtfixCPU(t *testing.T, fn func()) time.Duration {
	t.Helper()
	a, err := linux.ProcessCPU()
	if err != nil {
		t.Fatal(err)
	}
	fn()
	b, err := linux.ProcessCPU()
	if err != nil {
		t.Fatal(err)
	}
	return b - a
}

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

// TestRTFixPackOneWideDirectoryLinear: packing N entries costs about the same CPU
// whether they are in one directory or spread over directories of a thousand. The
// pack reads a directory once per 1024 names it packs, so one directory of N names
// is read N/1024 times: a sandbox that makes one directory of upload_entries (100000
// by default) empty files makes each download of it read ~10M names.
func TestRTFixPackOneWideDirectoryLinear(t *testing.T) {
	const n = 60000
	wide, spread := t.TempDir(), t.TempDir()
	rtfixFill(t, wide, n, n)
	rtfixFill(t, spread, n, 1000)
	lim := Limits{Bytes: 1 << 30, Entries: 100_000}
	pack := func(dir string) time.Duration {
		return rtfixCPU(t, func() {
			if _, _, err := Pack(io.Discard, dir, lim); err != nil {
				t.Fatal(err)
			}
		})
	}
	pack(spread) // warm the caches alike
	s, w := pack(spread), pack(wide)
	t.Logf("CPU packing %d entries: in directories of 1000 %v, in one directory %v", n, s, w)
	if w > 2*s {
		t.Errorf("one directory of %d entries took %v of CPU to pack, %.1f× the %v of the same entries in directories of 1000", n, w, float64(w)/float64(s), s)
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
