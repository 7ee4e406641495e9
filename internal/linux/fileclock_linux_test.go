package linux

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cordonhq/cordon/internal/testutil"
)

func ctimeOf(t *testing.T, p string) int64 {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ctim.Nano()
}

// A change made just before FileClock has a change time before it; one made just
// after, at or past it, in the same clock tick or not.
func TestFileClock(t *testing.T) {
	dir := t.TempDir()
	before, after := filepath.Join(dir, "before"), filepath.Join(dir, "after")
	for range 20 {
		if err := os.WriteFile(before, []byte("b"), 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := FileClock(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(after, []byte("a"), 0o644); err != nil {
			t.Fatal(err)
		}
		if b := ctimeOf(t, before); b >= c {
			t.Fatalf("a change before the clock was read has change time %d, not before %d", b, c)
		}
		if a := ctimeOf(t, after); a < c {
			t.Fatalf("a change after the clock was read has change time %d, before %d", a, c)
		}
	}
	if names, _ := os.ReadDir(dir); len(names) != 2 {
		t.Errorf("the probe was left: %v", names)
	}
}

// DataExtents gives a sparse file's data extents in order, clipped to the range asked,
// and CopyExtents copies them with the holes left.
func TestDataExtents(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "s"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const mb = 1 << 20
	f.Truncate(8 * mb)
	f.WriteAt([]byte("a"), 1*mb)
	f.WriteAt([]byte("b"), 5*mb)
	fi, _ := f.Stat()
	testutil.Require(t, fi.Sys().(*syscall.Stat_t).Blocks <= 1024, "the test directory's file system keeps holes")
	var got [][2]int64
	if err := DataExtents(f, 1*mb+1, 8*mb, func(s, e int64) error { got = append(got, [2]int64{s, e}); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0][0] != 1*mb+1 || got[0][1] <= got[0][0] || got[1][0] > 5*mb || got[1][1] <= 5*mb {
		t.Errorf("extents %v: want one clipped at %d and one holding %d", got, 1*mb+1, 5*mb)
	}
	g, err := os.Create(filepath.Join(dir, "copy"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := CopyExtents(g, f, 8*mb); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := g.ReadAt(b, 5*mb); err != nil || b[0] != 'b' {
		t.Errorf("the copy at 5 MiB: %q %v", b, err)
	}
	if fi, _ := g.Stat(); fi.Sys().(*syscall.Stat_t).Blocks > 1024 {
		t.Errorf("the copy took %d blocks: its holes were written", fi.Sys().(*syscall.Stat_t).Blocks)
	}
}
