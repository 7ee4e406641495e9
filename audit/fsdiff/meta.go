package fsdiff

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"time"
)

// The metadata a snapshot records beside content and mode: extended attributes, the
// modification time (in the stat key) and directories, so that a command that only
// sets an attribute, moves a file's mtime (which steers make) or makes or removes an
// empty directory is seen, as the host will see it.
//
// Extended attributes of every namespace the scanner may list are recorded: user.*
// (which any sandbox may set on the files it writes), and security.*, trusted.* and
// system.* (file capabilities, ACLs; a sandbox cannot set most of them without
// privilege, but the host would see them if it did). The workspace is hostile, so what
// is read is bounded: values are hashed, never kept (each at most 64 KiB, the kernel's
// bound), at most maxXattrRead bytes of them per entry (past it only names count, and
// the entry is reported as a problem); at most maxXattrs per entry are itemized, and
// at most maxXattrKept bytes of names per snapshot. Past either of those an entry keeps
// only one digest of all its names and values, so a change is still seen, not
// itemized.

const (
	maxXattrs    = 32      // attributes itemized per entry
	maxXattrRead = 1 << 20 // bytes of values read per entry
	maxXattrKept = 4 << 20 // bytes of names itemized per snapshot
)

// xattrSet is an entry's extended attributes.
type xattrSet struct {
	sum   [sha256.Size]byte // of every name and value read, in name order
	items []xattrItem       // by name; nil when not itemized
	// partial says that items does not list every attribute (past a bound).
	partial bool
}

type xattrItem struct {
	name string
	size int
	sum  [sha256.Size]byte
}

// equal reports whether x and y record the same attributes (nil is none).
func (x *xattrSet) equal(y *xattrSet) bool {
	if x == nil || y == nil {
		return x == y
	}
	return x.sum == y.sum
}

// readXattrs reads the extended attributes of the entry name of r ("." for r itself),
// or returns nil when it has none.
func (s *scanner) readXattrs(r dirHandle, name, rel string) *xattrSet {
	names, err := r.xattrNames(name)
	if err != nil {
		s.problem(rel, err)
		return nil
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	x := &xattrSet{}
	h := sha256.New()
	kept, read := 0, 0
	for i, n := range names {
		fmt.Fprintf(h, "%q\n", n)
		if read >= maxXattrRead {
			if read != math.MaxInt {
				read = math.MaxInt // reported once
				s.problem(rel, fmt.Errorf("extended attributes past %d bytes: only their names are compared", maxXattrRead))
			}
			x.partial = true
			continue
		}
		v, err := r.xattrValue(name, n)
		if err != nil {
			s.problem(rel, err)
			x.partial = true
			continue
		}
		read += len(v)
		it := xattrItem{name: n, size: len(v), sum: sha256.Sum256(v)}
		h.Write(it.sum[:])
		if i >= maxXattrs {
			x.partial = true
			continue
		}
		x.items = append(x.items, it)
		kept += len(n) + 48
	}
	h.Sum(x.sum[:0])
	if s.xattrKept.Add(int64(kept)) > maxXattrKept {
		s.xattrKept.Add(-int64(kept))
		x.items, x.partial = nil, true
	}
	return x
}

// XattrChange is one extended attribute added, changed or removed.
type XattrChange struct {
	Op   Op     // Added, Deleted or Modified
	Name string // as the file system lists it, such as "user.comment"
	// OldSize and NewSize are the value's length in bytes; OldSHA256 and NewSHA256 its
	// digest ("" on the missing side). Values themselves are never recorded.
	OldSize, NewSize     int
	OldSHA256, NewSHA256 string
}

// xattrChanges lists what changed from a to b (either may be nil). When either side
// was not itemized, a change of the set is one entry named "*": some attribute
// changed, which one is not known.
func xattrChanges(a, b *xattrSet) []XattrChange {
	if a.equal(b) {
		return nil
	}
	if a != nil && a.partial || b != nil && b.partial {
		out := []XattrChange{{Op: Modified, Name: "*"}}
		if a != nil {
			out[0].OldSHA256 = hex.EncodeToString(a.sum[:])
		}
		if b != nil {
			out[0].NewSHA256 = hex.EncodeToString(b.sum[:])
		}
		return out
	}
	var olds, news []xattrItem
	if a != nil {
		olds = a.items
	}
	if b != nil {
		news = b.items
	}
	var out []XattrChange
	i, j := 0, 0
	for i < len(olds) || j < len(news) {
		switch {
		case j == len(news) || i < len(olds) && olds[i].name < news[j].name:
			o := olds[i]
			out = append(out, XattrChange{Op: Deleted, Name: o.name, OldSize: o.size, OldSHA256: hex.EncodeToString(o.sum[:])})
			i++
		case i == len(olds) || news[j].name < olds[i].name:
			n := news[j]
			out = append(out, XattrChange{Op: Added, Name: n.name, NewSize: n.size, NewSHA256: hex.EncodeToString(n.sum[:])})
			j++
		default:
			o, n := olds[i], news[j]
			if o.sum != n.sum {
				out = append(out, XattrChange{Op: Modified, Name: n.name, OldSize: o.size, NewSize: n.size,
					OldSHA256: hex.EncodeToString(o.sum[:]), NewSHA256: hex.EncodeToString(n.sum[:])})
			}
			i, j = i+1, j+1
		}
	}
	return out
}

// mtimeOf is an entry's modification time.
func mtimeOf(e *entry) time.Time { return time.Unix(0, e.key.mtime).UTC() }
