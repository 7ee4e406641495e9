// Package layer reads the change set of a staged run and lands it in the real
// workspace.
//
// A staged run's workspace is an overlay: the real workspace is its lower layer, read
// only, and every write goes to an upper directory of the run's own. That upper
// directory *is* the change set — a file written is a file there, a file deleted a
// whiteout (a 0/0 character device), a directory emptied and refilled an opaque
// directory — so reading it costs what changed, not what the workspace holds. The
// sandbox wrote it: everything in it is hostile input. Read describes it without
// following a link or trusting a name; Apply lands it through [linux.Tree], which
// follows no link in the workspace either, and refuses what the contract did not let
// the sandbox write.
package layer

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"

	"github.com/cordonhq/cordon/internal/linux"
)

// Kind is what a change does to its path.
type Kind int

// Change kinds.
const (
	File    Kind = iota // a regular file written (new or replaced)
	Dir                 // a directory: new, or one whose entries changed (Opaque: replaced)
	Symlink             // a symbolic link written
	Delete              // the path was deleted (a whiteout)
)

func (k Kind) String() string {
	switch k {
	case File:
		return "file"
	case Dir:
		return "dir"
	case Symlink:
		return "symlink"
	case Delete:
		return "delete"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Change is one entry of the change set.
type Change struct {
	Path   string // slash-separated, relative to the workspace
	Kind   Kind
	Mode   uint32 // permission bits (File, Dir)
	Size   int64  // File
	Target string // Symlink
	// Opaque is a Dir that replaced whatever the workspace held there: entries of the
	// workspace's directory that the change set does not hold are deleted.
	Opaque bool
	// Origin is set when the overlay copied the entry up from the workspace (the
	// kernel's origin record): the workspace held it when the sandbox first wrote it.
	Origin bool
}

// Set is a staged run's change set: the changes, parents before children, and what
// the overlay held that cannot be landed (each with why), which Apply never lands.
type Set struct {
	Changes  []Change
	Problems []Problem

	seen int // names Read has counted against its bound
	// While Read reads: the upper directory, and the workspace (nil: no workspace to
	// compare with, see copyOf).
	up    *linux.Tree
	lower *lowerView
}

// lowerView is the workspace that a reader of the upper directory compares opaque
// directories with (copyOf), and what is left of the reading one call of the reader
// may spend on that: names (twice the reader's max, limits.diff.entries: a copy as
// large as the bound, both sides), bytes of files (copyBytesMax, both sides
// counted) and the names walked opening directories by their paths (as many as the
// names). Past any, no directory is taken as a copy: a sandbox that mirrors the
// workspace in its upper directory makes no checkpoint, rollback or apply read more
// than that of it for the comparison.
type lowerView struct {
	t       *linux.Tree // the workspace
	up      *linux.Tree // the upper directory, the reader's
	entries int
	bytes   int64
	// steps is what is left of the names that opening directories by their paths may
	// walk (as many as entries at the start); merged is mergedAt's answer for each
	// directory asked of.
	steps  int
	merged map[string]bool
}

// Problem is an entry of the upper directory that is not a change Apply can land.
type Problem struct {
	Path string
	Why  string
}

// ErrNotStaged means the upper directory is missing.
var ErrNotStaged = errors.New("no staged changes")

// ErrTooMany means the upper directory holds more entries than Read was let hold:
// the change set is refused (discard it, or raise limits.diff.entries and run again).
var ErrTooMany = errors.New("the staged change set has too many entries")

// Select returns the changes at or below one of paths (all of them when paths is
// empty), parents first, with the directories above each so that they can be made:
// those come as plain directories (never Opaque: landing one path inside a replaced
// directory deletes nothing else). unmatched are the paths no change is at or below.
func (s *Set) Select(paths []string) (out []Change, unmatched []string) {
	if len(paths) == 0 {
		return s.Changes, nil
	}
	direct := map[string]bool{}
	above := map[string]bool{}
	for _, want := range paths {
		want = path.Clean(filepath.ToSlash(want))
		n := 0
		for _, c := range s.Changes {
			switch {
			case c.Path == want || isBelow(c.Path, want):
				direct[c.Path] = true
				n++
			case c.Kind == Dir && isBelow(want, c.Path):
				above[c.Path] = true
			}
		}
		if n == 0 {
			unmatched = append(unmatched, want)
		}
	}
	for _, c := range s.Changes {
		switch {
		case direct[c.Path]:
			out = append(out, c)
		case above[c.Path]:
			c.Opaque = false
			out = append(out, c)
		}
	}
	return out, unmatched
}

// isBelow reports whether p lies below dir (not dir itself).
func isBelow(p, dir string) bool {
	return dir == "." && p != "." || len(p) > len(dir) && p[len(dir)] == '/' && p[:len(dir)] == dir
}
