package contract

import (
	"os"
	"testing"
)

// BenchmarkCompileDefault is the contract part of every `cordon run` start.
func BenchmarkCompileDefault(b *testing.B) {
	dir := b.TempDir()
	h, err := HostFromOS()
	if err != nil {
		b.Fatal(err)
	}
	h.Cwd = dir
	if err := os.MkdirAll(dir+"/.git", 0o755); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile(Default(), h); err != nil {
			b.Fatal(err)
		}
	}
}
