package fsdiff

import (
	"bytes"
	"errors"
	"fmt"
	"hash"
	"io"
	"path"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of the bounds in [Options]: what one snapshot and diff may cost cordon on
// the host, whatever the sandbox left in the workspace.
const (
	DefaultMaxEntries   = 100_000          // entries recorded per snapshot
	DefaultMaxFileHash  = 1 << 30          // 1 GiB hashed of one file
	DefaultMaxHashBytes = 4 << 30          // 4 GiB hashed per snapshot
	DefaultMaxPatch     = 16 << 20         // 16 MiB of patch per diff
	DefaultTimeout      = 60 * time.Second // wall time of one snapshot and diff
)

// MaxGapPaths is how many paths a [Gap] names of each thing it counts.
const MaxGapPaths = 20

// Gap says what a diff did not do because a bound of [Options] stopped it. The zero
// value means nothing was left out. Counts are exact unless said otherwise; the
// paths are the first [MaxGapPaths] in path order.
type Gap struct {
	// Unlisted counts entries listed in a directory but not recorded, past
	// MaxEntries, the bytes their paths may take (256 per entry of MaxEntries), or
	// the deadline (at least this many: a directory not scanned counts as one).
	Unlisted int
	// Incomplete counts the directories, on either side, whose entries were not all
	// recorded; IncompletePaths names them.
	Incomplete      int
	IncompletePaths []string
	// NotCompared counts paths below an incomplete directory that one side has and
	// the other was not seen to have: not reported as added or deleted.
	NotCompared int
	// NotHashed counts changed files compared by stat data only (size, mtime,
	// inode, ctime), not read: past MaxFileHash, MaxHashBytes or the deadline.
	NotHashed      int
	NotHashedPaths []string
	// PatchOmitted counts changes whose patch (or part of it) was left out, past
	// MaxPatch or the deadline.
	PatchOmitted int
	// TimedOut says that the deadline (Timeout) passed during the snapshot or diff.
	TimedOut bool
}

// Empty reports whether nothing was left out.
func (g *Gap) Empty() bool {
	return g.Unlisted == 0 && g.Incomplete == 0 && g.NotCompared == 0 && g.NotHashed == 0 &&
		g.PatchOmitted == 0 && !g.TimedOut
}

// errStopped is returned by hashing that the deadline stopped.
var errStopped = errors.New("diff deadline passed")

// Why a file was not hashed (entry.unhashed).
const (
	unhashedFile     = "larger than the per-file hash bound"
	unhashedBudget   = "hash budget of the diff spent"
	unhashedDeadline = "diff deadline passed"
)

func (o Options) boundDefaults() Options {
	if o.MaxEntries <= 0 {
		o.MaxEntries = DefaultMaxEntries
	}
	if o.MaxFileHash <= 0 {
		o.MaxFileHash = DefaultMaxFileHash
	}
	if o.MaxHashBytes <= 0 {
		o.MaxHashBytes = DefaultMaxHashBytes
	}
	if o.MaxPatch <= 0 {
		o.MaxPatch = DefaultMaxPatch
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	return o
}

// started is o with the deadline of a snapshot or diff starting now.
func (o Options) started() Options {
	o.deadline = time.Now().Add(o.Timeout)
	return o
}

func (o Options) late() bool { return !o.deadline.IsZero() && time.Now().After(o.deadline) }

// bounds is what a scanner counts against the bounds of its Options.
type bounds struct {
	entries  atomic.Int64 // entries admitted
	paths    atomic.Int64 // bytes of the paths of the entries admitted
	unlisted atomic.Int64
	hashed   atomic.Int64 // bytes reserved for hashing
	timedOut atomic.Bool

	// mu guards the field below.
	mu         sync.Mutex
	incomplete map[string]bool // directories whose entries were not all recorded
}

// pathBytesPerEntry is what the paths a snapshot records may take on average: the
// snapshot holds every path whole, so a chain of directories of long names, each a
// level deeper, costs the square of its depth (2,000 levels of 255-byte names: half
// a gigabyte in 2,000 entries), and the entries bound alone does not bound it.
const pathBytesPerEntry = 256

// admit reserves one entry of directory rel, whose path is n bytes long, of which
// left (this one included) are still to record; false means stop: a bound (the
// entries, their paths' bytes: pathBytesPerEntry per entry of MaxEntries) or the
// deadline is reached, and the rest is counted.
func (s *scanner) admit(rel string, left, n int) bool {
	late := s.opts.late()
	if !late && s.entries.Add(1) <= int64(s.opts.MaxEntries) &&
		s.paths.Add(int64(n)) <= int64(s.opts.MaxEntries)*pathBytesPerEntry {
		return true
	}
	if late {
		s.timedOut.Store(true)
	}
	s.unlisted.Add(int64(left))
	s.markIncomplete(rel)
	return false
}

// canAdmit is how many more entries the entries bound lets the snapshot record: a
// directory's listing keeps no more names than that (names.go).
func (s *scanner) canAdmit() int {
	return int(max(int64(s.opts.MaxEntries)-s.entries.Load(), 0))
}

func (s *scanner) markIncomplete(rel string) {
	s.bounds.mu.Lock()
	if s.incomplete == nil {
		s.incomplete = make(map[string]bool)
	}
	s.incomplete[rel] = true
	s.bounds.mu.Unlock()
}

// lateDir reports whether the directory rel is past the deadline, and records it as
// not scanned when it is.
func (s *scanner) lateDir(rel string) bool {
	if !s.opts.late() {
		return false
	}
	s.timedOut.Store(true)
	s.unlisted.Add(1)
	s.markIncomplete(rel)
	return true
}

// hashable reserves size bytes of hashing for a file, or says why it is not hashed.
func (s *scanner) hashable(size int64) (why string) {
	switch {
	case s.opts.late():
		s.timedOut.Store(true)
		return unhashedDeadline
	case size > s.opts.MaxFileHash:
		return unhashedFile
	case s.hashed.Add(size) > s.opts.MaxHashBytes:
		s.hashed.Add(-size)
		return unhashedBudget
	}
	return ""
}

// stopped reports whether hashing must stop now.
func (s *scanner) stopped() bool { return s.opts.late() }

// snapBounds is what a snapshot records of the bounds that stopped it.
type snapBounds struct {
	unlisted   int
	incomplete map[string]bool
	timedOut   bool
}

func (s *scanner) snapBounds() snapBounds {
	s.bounds.mu.Lock()
	defer s.bounds.mu.Unlock()
	return snapBounds{int(s.unlisted.Load()), s.incomplete, s.timedOut.Load()}
}

// under reports whether p lies below (or is) one of the incomplete directories.
func (b snapBounds) under(p string) bool {
	if len(b.incomplete) == 0 {
		return false
	}
	for d := p; ; d = path.Dir(d) {
		if b.incomplete[d] {
			return true
		}
		if d == "." || d == "/" {
			return false
		}
	}
}

// gap is the Gap of a diff from a to b, before the patch is rendered.
func gapOf(a, b *snapshot, out []pending, notCompared int) Gap {
	g := Gap{Unlisted: b.bounds.unlisted, NotCompared: notCompared, TimedOut: b.bounds.timedOut}
	dirs := make(map[string]bool)
	for _, s := range []*snapshot{a, b} {
		for d := range s.bounds.incomplete {
			dirs[d] = true
		}
	}
	g.Incomplete = len(dirs)
	g.IncompletePaths = firstPaths(dirs)
	for i := range out {
		if unhashed(out[i].old) || unhashed(out[i].new) {
			g.NotHashed++
			if len(g.NotHashedPaths) < MaxGapPaths {
				g.NotHashedPaths = append(g.NotHashedPaths, out[i].Path)
			}
		}
	}
	return g
}

func unhashed(e *entry) bool { return e != nil && e.unhashed != "" }

func firstPaths(set map[string]bool) []string {
	if len(set) == 0 {
		return nil
	}
	all := make([]string, 0, len(set))
	for p := range set {
		all = append(all, p)
	}
	slices.Sort(all)
	return all[:min(len(all), MaxGapPaths)]
}

var zeros [64 << 10]byte

// hashZeros writes n zero bytes into h (a hole of a sparse file: never read).
func hashZeros(h hash.Hash, n int64, stop func() bool) error {
	for n > 0 {
		if stop() {
			return errStopped
		}
		k := min(n, int64(len(zeros)))
		h.Write(zeros[:k])
		n -= k
	}
	return nil
}

// copyChunks copies r into h, checking stop between chunks of 1 MiB.
func copyChunks(h hash.Hash, r io.Reader, stop func() bool) (int64, error) {
	var total int64
	for {
		if stop() {
			return total, errStopped
		}
		n, err := io.CopyN(h, r, 1<<20)
		total += n
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// unhashedEntry makes e a file tracked by its stat data only, for the reason why.
func unhashedEntry(e *entry, why string) {
	e.kind, e.unhashed, e.hasSum = Large, why, false
}

// notHashedNote is the patch notice of a change with a side not hashed.
func notHashedNote(c *pending) string {
	for _, e := range []*entry{c.new, c.old} {
		if unhashed(e) {
			return fmt.Sprintf("not hashed: %s; changed by size, mtime or inode", e.unhashed)
		}
	}
	return ""
}

// cut returns the patch, cut at a line boundary to at most max bytes; a cut counts
// the change it falls in as omitted in g.
func (p *patcher) cut(max int, g *Gap) []byte {
	b := p.buf.Bytes()
	if len(b) <= max {
		return b
	}
	g.PatchOmitted++
	b = b[:max]
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[:i+1]
	}
	return append(b, fmt.Sprintf("(patch cut at %d bytes: the diff's patch bound)\n", len(b))...)
}
