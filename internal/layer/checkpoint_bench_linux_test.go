package layer

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/testutil"
)

// BenchmarkCheckpoint1000 is the cost of the automatic checkpoint before a command in
// a staged session whose upper directory holds 1,000 changed files (4 KiB each), one
// of which changed since the previous checkpoint.
func BenchmarkCheckpoint1000(b *testing.B) {
	upper, stage := b.TempDir(), b.TempDir()
	for i := 0; i < 1000; i++ {
		p := filepath.Join(upper, "src", fmt.Sprintf("d%d", i/100), fmt.Sprintf("f%d", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, 4096), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	prev, err := TakeCheckpoint(upper, "", filepath.Join(stage, "base"), nil, testMax)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if err := os.WriteFile(filepath.Join(upper, "src", "d0", "f1"), []byte(fmt.Sprint(i)), 0o644); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		c, err := TakeCheckpoint(upper, "", filepath.Join(stage, fmt.Sprint(i)), prev, testMax)
		if err != nil {
			b.Fatal(err)
		}
		if c.Copied != 1 || c.Linked != 999 {
			b.Fatalf("copied %d linked %d", c.Copied, c.Linked)
		}
		prev = c
	}
}

// BenchmarkCheckpointRestored1000 is the cost of the automatic checkpoint before a
// command when the upper directory holds a directory a rollback restored (opaque, an
// exact copy of the workspace's 1,000 files of 4 KiB in ten directories): it is read
// and compared with the workspace's, and nothing is copied.
func BenchmarkCheckpointRestored1000(b *testing.B) {
	testutil.RequireRoot(b) // the opaque mark is a trusted.* attribute
	ws, upper, stage := b.TempDir(), b.TempDir(), b.TempDir()
	mtime := time.Unix(1_700_000_000, 0)
	for i := 0; i < 1000; i++ {
		rel := filepath.Join("src", fmt.Sprintf("d%d", i/100), fmt.Sprintf("f%d", i))
		for _, root := range []string{ws, upper} {
			p := filepath.Join(root, rel)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(p, make([]byte, 4096), 0o644); err != nil {
				b.Fatal(err)
			}
			if err := os.Chtimes(p, time.Time{}, mtime); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := linux.Lsetxattr(filepath.Join(upper, "src"), xattrOpaque, "y"); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, err := TakeCheckpoint(upper, ws, filepath.Join(stage, fmt.Sprint(i)), nil, testMax)
		if err != nil {
			b.Fatal(err)
		}
		if c.Copied != 0 || c.Linked != 0 {
			b.Fatalf("copied %d linked %d: the restored directory is not taken for a copy", c.Copied, c.Linked)
		}
	}
}
