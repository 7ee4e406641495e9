package audit

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/rogpeppe/go-internal/diff"

	"github.com/cordonhq/cordon/audit/fsdiff"
)

// texts is what the content checks know of a changed file: its old and new side.
type texts struct {
	old, new side
}

// side is what is known of one version of a file: some or all of its lines, each
// marked when the change deleted it (old side) or added it (new side).
type side struct {
	known bool       // anything is known of the content (not binary, large, or cut from the log)
	whole bool       // lines are all of the content
	lines []textLine // known lines, in order
}

type textLine struct {
	n       int    // 1-based line number
	text    string // without its newline
	changed bool
	noEOL   bool // the file ends on this line, without a newline
}

func emptySide() side { return side{known: true, whole: true} }

func unknownSide() side { return side{} }

// added returns s as the content of a file that did not exist before (a rename's new
// name): every line is new, and only a whole side is known.
func (s side) added() side {
	if !s.whole {
		return unknownSide()
	}
	out := side{known: true, whole: true, lines: make([]textLine, len(s.lines))}
	for i, l := range s.lines {
		l.changed = true
		out.lines[i] = l
	}
	return out
}

// prefix returns how many lines are known without a gap from line 1.
func (s side) prefix() int {
	n := 0
	for _, l := range s.lines {
		if l.n != n+1 {
			break
		}
		n++
	}
	return n
}

// bytes returns the content of a whole side.
func (s side) bytes() []byte {
	var b bytes.Buffer
	for _, l := range s.lines {
		b.WriteString(l.text)
		if !l.noEOL {
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

// changedLines returns the lines the change added (new side) or deleted (old side).
func (s side) changedLines() []textLine {
	var out []textLine
	for _, l := range s.lines {
		if l.changed {
			out = append(out, l)
		}
	}
	return out
}

// textsOf builds what Classify knows from c: the whole content when both sides are
// given (marked with a line diff), else the patch.
func textsOf(c Changed) texts {
	old, new := c.Old, c.New
	switch c.Op {
	case fsdiff.Added:
		old = []byte{}
	case fsdiff.Deleted:
		new = []byte{}
	}
	if old != nil && new != nil {
		return wholeTexts(old, new)
	}
	if c.Patch == "" {
		return texts{old: unknownSide(), new: unknownSide()}
	}
	return parseSection(c.Patch)
}

// wholeTexts marks the lines that differ between old and new, using the same line diff
// as fsdiff.
func wholeTexts(old, new []byte) texts {
	t := parseSection(string(diff.Diff("a", old, "b", new)))
	t.old = wholeSide(old, t.old)
	t.new = wholeSide(new, t.new)
	return t
}

// wholeSide returns every line of content, marked as in the hunks of h.
func wholeSide(content []byte, h side) side {
	s := side{known: true, whole: true}
	changed := make(map[int]bool)
	for _, l := range h.lines {
		changed[l.n] = l.changed
	}
	text := string(content)
	for n := 1; text != ""; n++ {
		l := textLine{n: n, changed: changed[n]}
		i := strings.IndexByte(text, '\n')
		if i < 0 {
			l.text, l.noEOL, text = text, true, ""
		} else {
			l.text, text = text[:i], text[i+1:]
		}
		s.lines = append(s.lines, l)
	}
	return s
}

// parseSection reads one file's part of a unified diff as fsdiff writes it. Hunks give
// some lines of both sides; a single hunk from an empty side (@@ -0,0 +1,N @@, an
// added file) gives the whole other side. A notice instead of hunks ("Binary files …",
// "Files … differ") means the content is not known; neither means it did not change (a
// mode change).
func parseSection(sec string) texts {
	t := texts{old: side{known: true}, new: side{known: true}}
	var (
		on, nn, oleft, nleft int  // next line numbers, and lines left in the hunk
		hunks                int  // hunks read
		oldEmpty, newEmpty   bool // a hunk said a side is empty
		inHunk, broken       bool
		last                 byte // the kind of the last hunk line: ' ', '-' or '+'
	)
	for l := range strings.Lines(sec) {
		l = strings.TrimSuffix(l, "\n")
		switch {
		case strings.HasPrefix(l, "@@ "):
			h, ok := parseHunkHeader(l)
			if !ok || oleft > 0 || nleft > 0 {
				broken = true
			}
			on, oleft, nn, nleft, inHunk = h[0], h[1], h[2], h[3], ok
			oldEmpty, newEmpty, hunks = h[0] == 0 && h[1] == 0, h[2] == 0 && h[3] == 0, hunks+1
		case !inHunk:
			if hunks == 0 && (strings.HasPrefix(l, "Binary files ") || strings.HasPrefix(l, "Files ")) {
				return texts{old: unknownSide(), new: unknownSide()}
			}
		case l == `\ No newline at end of file`:
			markNoEOL(&t, last)
		case strings.HasPrefix(l, " ") && oleft > 0 && nleft > 0:
			t.old.lines = append(t.old.lines, textLine{n: on, text: l[1:]})
			t.new.lines = append(t.new.lines, textLine{n: nn, text: l[1:]})
			on, nn, oleft, nleft, last = on+1, nn+1, oleft-1, nleft-1, ' '
		case strings.HasPrefix(l, "-") && oleft > 0:
			t.old.lines = append(t.old.lines, textLine{n: on, text: l[1:], changed: true})
			on, oleft, last = on+1, oleft-1, '-'
		case strings.HasPrefix(l, "+") && nleft > 0:
			t.new.lines = append(t.new.lines, textLine{n: nn, text: l[1:], changed: true})
			nn, nleft, last = nn+1, nleft-1, '+'
		default:
			inHunk, broken = false, true // not a hunk line: malformed or cut
		}
	}
	complete := hunks == 1 && !broken && oleft == 0 && nleft == 0
	t.old.whole = !broken && hunks == 1 && (oldEmpty || complete && newEmpty)
	t.new.whole = !broken && hunks == 1 && (newEmpty || complete && oldEmpty)
	return t
}

// markNoEOL marks the last line of the kind last as the end of its file (or files).
func markNoEOL(t *texts, last byte) {
	if o := len(t.old.lines) - 1; o >= 0 && (last == ' ' || last == '-') {
		t.old.lines[o].noEOL = true
	}
	if n := len(t.new.lines) - 1; n >= 0 && (last == ' ' || last == '+') {
		t.new.lines[n].noEOL = true
	}
}

// parseHunkHeader parses "@@ -a[,b] +c[,d] @@…" into a, b, c, d (b and d default to 1).
func parseHunkHeader(l string) ([4]int, bool) {
	var h [4]int
	f := strings.Fields(l)
	if len(f) < 4 || f[0] != "@@" || f[3] != "@@" || !strings.HasPrefix(f[1], "-") || !strings.HasPrefix(f[2], "+") {
		return h, false
	}
	for i, r := range []string{f[1][1:], f[2][1:]} {
		start, count, found := strings.Cut(r, ",")
		if !found {
			count = "1"
		}
		a, err1 := strconv.Atoi(start)
		b, err2 := strconv.Atoi(count)
		if err1 != nil || err2 != nil || a < 0 || b < 0 {
			return h, false
		}
		h[2*i], h[2*i+1] = a, b
	}
	return h, true
}
