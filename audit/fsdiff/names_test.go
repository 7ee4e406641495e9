package fsdiff

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSmallestKeepsTheSmallest checks the bounded listing against a sort: whatever
// the order and batching of the names, it keeps the keep smallest and counts all.
func TestSmallestKeepsTheSmallest(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 7, 100, 1000} {
		for _, keep := range []int{0, 1, 5, 99, 100, 101, 5000} {
			names := make([]string, n)
			for i := range names {
				names[i] = fmt.Sprintf("f%05d", rng.IntN(3*n+1)) // with duplicates
			}
			s := smallest{keep: keep}
			for rest := names; len(rest) > 0; {
				k := min(len(rest), 1+rng.IntN(50))
				s.offer(rest[:k])
				rest = rest[k:]
			}
			want := slices.Clone(names)
			slices.Sort(want)
			want = want[:min(keep, n)]
			if got := s.sorted(); !slices.Equal(got, want) || s.total != n {
				t.Fatalf("n=%d keep=%d: kept %v (total %d); want %v (total %d)", n, keep, got, s.total, want, n)
			}
		}
	}
}
