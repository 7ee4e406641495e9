package fsdiff

import (
	"bytes"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	// The line diff comes from github.com/rogpeppe/go-internal/diff, a maintained copy of
	// the Go toolchain's internal/diff (used by gofmt -d and cmd/go). We chose it over a
	// Myers implementation (such as go-udiff, derived from x/tools' internal diff) because
	// its anchored ("patience"-like) algorithm is guaranteed O(n log n): a workload cannot
	// write a file crafted to make the audit's diff take quadratic time. Anchoring on
	// unique lines also gives the more readable hunks a reviewer wants. It is pure Go, has
	// no dependencies beyond the standard library, and is tested upstream against the
	// Go toolchain's own test suite.
	"github.com/rogpeppe/go-internal/diff"
)

// patcher renders changes as one unified diff with git-style extended headers.
type patcher struct {
	buf bytes.Buffer
}

// write appends the patch of c and fills in its line counts.
func (p *patcher) write(c *pending, opts Options) {
	oldName, newName := "a/"+c.Path, "b/"+c.Path
	if c.Op == Renamed {
		oldName = "a/" + c.OldPath
	}
	fmt.Fprintf(&p.buf, "diff --git %s %s\n", quote(oldName), quote(newName))
	what := "file"
	if c.Kind == Dir {
		what = "directory"
	}
	switch c.Op {
	case Added:
		fmt.Fprintf(&p.buf, "new %s mode %06o\n", what, c.NewMode)
		oldName = "/dev/null"
	case Deleted:
		fmt.Fprintf(&p.buf, "deleted %s mode %06o\n", what, c.OldMode)
		newName = "/dev/null"
	default:
		if c.OldMode != c.NewMode {
			fmt.Fprintf(&p.buf, "old mode %06o\nnew mode %06o\n", c.OldMode, c.NewMode)
		}
	}
	p.meta(&c.Change)
	if c.rewritten {
		fmt.Fprintf(&p.buf, "File %s rewritten with the content the git index recorded for it "+
			"(its content before the command was not read: its stat data matched the index)\n", quote(newName))
		return
	}
	if c.Op == Renamed {
		fmt.Fprintf(&p.buf, "similarity index 100%%\nrename from %s\nrename to %s\n",
			quote(c.OldPath), quote(c.Path))
		return
	}
	p.content(c, quote(oldName), quote(newName), opts)
}

// meta appends what changed of c's metadata, one line each, as no git header says it:
// its modification time when only it moved or it moved back, and its extended
// attributes (names quoted, values by size and digest only).
func (p *patcher) meta(c *Change) {
	if !c.OldMtime.IsZero() && (c.Op == Touched || c.NewMtime.Before(c.OldMtime)) {
		fmt.Fprintf(&p.buf, "mtime %s -> %s\n", c.OldMtime.Format(time.RFC3339Nano), c.NewMtime.Format(time.RFC3339Nano))
	}
	for _, x := range c.Xattrs {
		side := func(size int, sum string) string {
			if sum == "" {
				return "none"
			}
			return fmt.Sprintf("%d bytes sha256:%.16s", size, sum)
		}
		switch x.Op {
		case Added:
			fmt.Fprintf(&p.buf, "xattr added %s (%s)\n", quote(x.Name), side(x.NewSize, x.NewSHA256))
		case Deleted:
			fmt.Fprintf(&p.buf, "xattr removed %s (%s)\n", quote(x.Name), side(x.OldSize, x.OldSHA256))
		default:
			if x.Name == "*" {
				fmt.Fprintf(&p.buf, "xattrs changed (too many to itemize)\n")
				continue
			}
			fmt.Fprintf(&p.buf, "xattr changed %s (%s -> %s)\n", quote(x.Name), side(x.OldSize, x.OldSHA256), side(x.NewSize, x.NewSHA256))
		}
	}
}

// content appends the content part of a change: hunks for text, or a one-line notice.
func (p *patcher) content(c *pending, oldName, newName string, opts Options) {
	if c.old != nil && c.new != nil && c.old.hasSum && c.new.hasSum && c.old.sum == c.new.sum {
		return // mode change only
	}
	kinds := [2]Kind{Text, Text}
	if c.old != nil {
		kinds[0] = c.old.kind
	}
	if c.new != nil {
		kinds[1] = c.new.kind
	}
	for _, k := range kinds {
		switch k {
		case Special, Dir:
			return // no content to speak of
		case Binary:
			fmt.Fprintf(&p.buf, "Binary files %s and %s differ\n", oldName, newName)
			return
		case Large:
			if note := notHashedNote(c); note != "" {
				fmt.Fprintf(&p.buf, "Files %s and %s differ (%s)\n", oldName, newName, note)
				return
			}
			why := "over the memory budget"
			if max(c.OldSize, c.NewSize) > opts.MaxTextSize {
				why = fmt.Sprintf("larger than %d bytes", opts.MaxTextSize)
			}
			fmt.Fprintf(&p.buf, "Files %s and %s differ (content not kept: %s)\n", oldName, newName, why)
			return
		case Unreadable:
			fmt.Fprintf(&p.buf, "Files %s and %s differ (unreadable)\n", oldName, newName)
			return
		}
	}
	var old, new []byte
	if c.old != nil {
		old = c.old.content
	}
	if c.new != nil {
		new = c.new.content
	}
	d := diff.Diff("a", old, "b", new)
	if len(d) == 0 {
		return // both empty
	}
	// Replace the library's "diff a b", "--- a", "+++ b" lines with ours.
	for range 3 {
		d = d[bytes.IndexByte(d, '\n')+1:]
	}
	fmt.Fprintf(&p.buf, "--- %s\n+++ %s\n", oldName, newName)
	p.buf.Write(d)
	c.Added, c.Deleted = countLines(d)
}

// countLines counts added and deleted lines in the hunks of a unified diff.
func countLines(hunks []byte) (added, deleted int) {
	for len(hunks) > 0 {
		switch hunks[0] {
		case '+':
			added++
		case '-':
			deleted++
		}
		i := bytes.IndexByte(hunks, '\n')
		if i < 0 {
			break
		}
		hunks = hunks[i+1:]
	}
	return added, deleted
}

// quote returns name as it appears in a patch header: C-quoted, as git does, when it
// holds a control character, a quote, a backslash or invalid UTF-8, so that a file name
// can never forge a line of the patch.
func quote(name string) string {
	if !utf8.ValidString(name) {
		return strconv.QuoteToASCII(name)
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || r == '"' || r == '\\' || r == '\u2028' || r == '\u2029' {
			return strconv.Quote(name)
		}
	}
	return name
}
