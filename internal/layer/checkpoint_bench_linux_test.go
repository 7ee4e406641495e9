package layer

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
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
