package linux

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
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
