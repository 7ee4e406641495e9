package uids

import "testing"

// BenchmarkIDsInUse: the scan of every host process that each lease makes.
func BenchmarkIDsInUse(b *testing.B) {
	for range b.N {
		if _, err := idsInUse(DefaultRange); err != nil {
			b.Fatal(err)
		}
	}
}
