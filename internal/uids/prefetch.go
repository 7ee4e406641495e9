package uids

import (
	"sync"
	"time"
)

// prefetchFresh is how old a prefetched scan may be when a lease uses it. A process
// can start running as a uid between any scan and the sandbox's start; this widens
// that window by no more than the work the scan overlapped.
const prefetchFresh = time.Second

// prefetched is the one scan of host processes a process may start ahead of its
// lease ([Prefetch]).
var prefetched struct {
	once sync.Once
	mu   sync.Mutex
	r    Range
	done chan struct{}
	at   time.Time
	used map[int]bool
	err  error
	took bool
}

// Prefetch starts, in the background, the scan of every host process that the next
// lease on r must make ([idsInUse]: a read of each /proc/PID/status, a few
// milliseconds on a busy host), so that it overlaps the work before the lease (the
// contract's load and compilation) instead of standing before the sandbox. The next
// acquire on a pool of r takes it, once, when it is at most [prefetchFresh] old, and
// scans anew otherwise. Only a process's first call does anything.
func Prefetch(r Range) {
	prefetched.once.Do(func() {
		prefetched.mu.Lock()
		prefetched.r, prefetched.done = r, make(chan struct{})
		prefetched.mu.Unlock()
		go func() {
			used, err := idsInUse(r)
			prefetched.mu.Lock()
			prefetched.used, prefetched.err, prefetched.at = used, err, time.Now()
			prefetched.mu.Unlock()
			close(prefetched.done)
		}()
	})
}

// inUse is [idsInUse] of r: the prefetched scan when there is a fresh one of r not
// taken yet (waiting for it to end), else a new scan.
func inUse(r Range) (map[int]bool, error) {
	prefetched.mu.Lock()
	done, same := prefetched.done, prefetched.r == r && !prefetched.took
	if same {
		prefetched.took = true
	}
	prefetched.mu.Unlock()
	if done != nil && same {
		<-done
		prefetched.mu.Lock()
		used, err, at := prefetched.used, prefetched.err, prefetched.at
		prefetched.mu.Unlock()
		if err == nil && time.Since(at) <= prefetchFresh {
			return used, nil
		}
	}
	return idsInUse(r)
}
