// Package termtext makes text that hostile input shaped safe to show: on a terminal, in
// one line of an error, in a report. File names, hosts, commit subjects and command
// lines come from the sandbox; printed raw, a control sequence in one can drive the
// reader's terminal, a newline can forge a line of output, and a bidirectional override
// or a zero-width character can make text read other than it is ("trojan source").
//
// Such characters are shown as escapes (\x1b, \u202e) instead of being interpreted;
// bytes that are not UTF-8 are shown as \xNN. Everything else, tabs included, is kept.
package termtext

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Line returns s safe to print as one line: newlines are escaped too.
func Line(s string) string { return escape(s, false) }

// Text returns s safe to print as lines of text: newlines are kept, every other
// character Line escapes is escaped.
func Text(s string) string { return escape(s, true) }

func escape(s string, keepNewline bool) string {
	if clean(s, keepNewline) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n' && keepNewline, !Unsafe(r):
			b.WriteString(s[i : i+n])
		case r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += n
	}
	return b.String()
}

func clean(s string, keepNewline bool) bool {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || (Unsafe(r) && !(r == '\n' && keepNewline)) {
			return false
		}
		i += n
	}
	return true
}

// Unsafe reports whether r is a character Line escapes: a control character other
// than tab (C0, DEL, C1), a line or paragraph separator, a bidirectional mark,
// override or isolate, a zero-width character, or the byte-order mark.
func Unsafe(r rune) bool {
	switch {
	case r == '\t':
		return false
	case unicode.IsControl(r):
		return true
	case r >= 0x200b && r <= 0x200f, r == 0x2028, r == 0x2029, r >= 0x202a && r <= 0x202e,
		r >= 0x2060 && r <= 0x2069, r == 0xfeff, r == 0x061c:
		return true
	}
	return false
}
