package uids

import (
	"os"
	"testing"
)

// TestPrefetchTakenOnceWhenFresh: the next lease on the prefetched range takes the
// prefetched scan, once; another range, or a second lease, scans anew.
func TestPrefetchTakenOnceWhenFresh(t *testing.T) {
	me := os.Getuid()
	r := Range{Base: me, Count: 1}
	Prefetch(r)
	if used, err := inUse(Range{Base: me + 1, Count: 1}); err != nil || used[me] {
		t.Fatalf("another range: %v %v; want a scan of its own", used, err)
	}
	if prefetched.took {
		t.Fatal("a scan of another range took the prefetched one")
	}
	used, err := inUse(r)
	if err != nil || !used[me] {
		t.Fatalf("the prefetched range: %v %v; want this process's uid %d in use", used, err, me)
	}
	if !prefetched.took {
		t.Fatal("the lease did not take the prefetched scan")
	}
	prefetched.mu.Lock()
	prefetched.used = map[int]bool{} // what a second lease must not see
	prefetched.mu.Unlock()
	if used, err := inUse(r); err != nil || !used[me] {
		t.Fatalf("a second lease: %v %v; want a new scan", used, err)
	}
}
