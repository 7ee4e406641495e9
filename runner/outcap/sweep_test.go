package outcap

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestTrimRemovesOldestFirst(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	for i, name := range []string{"1.stdout", "2.stdout", "3.stdout"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, make([]byte, 100), 0o644); err != nil {
			t.Fatal(err)
		}
		mod := now.Add(time.Duration(i) * time.Second)
		if err := os.Chtimes(p, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
	n, err := Trim(dir, 150)
	if err != nil || n != 2 {
		t.Fatalf("Trim = %d, %v; want 2 removed", n, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "3.stdout")); err != nil {
		t.Errorf("the newest spill file must stay: %v", err)
	}
}
