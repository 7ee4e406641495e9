package fsdiff

import (
	"container/heap"
	"slices"
)

// Listing a directory is bounded, too: a directory may hold millions of names (a
// sandbox makes them in seconds), and a snapshot records at most MaxEntries entries in
// all, so a listing keeps only the names that could still be recorded (the smallest,
// so that which ones does not depend on the order the file system lists them in) and
// counts the rest. Its memory is then bounded by the entries bound, not by the
// directory.

// smallest keeps the keep smallest names of those offered, and counts them all.
//
// Until keep names are held they are only appended (most directories never reach the
// bound, and pushing each through container/heap boxes it); the heap is built when the
// bound is reached.
type smallest struct {
	keep   int
	total  int
	h      maxHeap
	heaped bool // h is a heap: keep names were reached
}

func (s *smallest) offer(batch []string) {
	for _, n := range batch {
		s.total++
		switch {
		case len(s.h) < s.keep:
			s.h = append(s.h, n)
		case len(s.h) == 0:
		case !s.heaped:
			heap.Init(&s.h)
			s.heaped = true
			fallthrough
		default:
			if n < s.h[0] {
				s.h[0] = n
				heap.Fix(&s.h, 0)
			}
		}
	}
}

// sorted returns the names kept, sorted.
func (s *smallest) sorted() []string {
	out := []string(s.h)
	slices.Sort(out)
	return out
}

// maxHeap is a heap of names, the largest on top.
type maxHeap []string

func (h maxHeap) Len() int           { return len(h) }
func (h maxHeap) Less(i, j int) bool { return h[i] > h[j] }
func (h maxHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *maxHeap) Push(x any)        { *h = append(*h, x.(string)) }
func (h *maxHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
