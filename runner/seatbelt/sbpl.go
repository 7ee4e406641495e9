package seatbelt

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// Errors of profile generation.
var (
	// ErrInexpressible is wrapped by the error for a path the profile cannot name
	// safely: not absolute, not clean, not UTF-8, or holding a control character (or, in
	// a rule that also matches it case-insensitively, a double quote).
	ErrInexpressible = errors.New("path cannot be expressed in SBPL")
)

// filter is one SBPL filter. Every filter of a generated profile is built by the
// constructors below and rendered by [filter.render]: no path reaches the profile text
// any other way.
type filter struct {
	kind string // literal, subpath, regex, remote-ip, unix-socket
	arg  string
}

func literal(p string) filter { return filter{"literal", p} }
func subpath(p string) filter { return filter{"subpath", p} }

// render writes f as SBPL, quoting its argument.
func (f filter) render() (string, error) {
	switch f.kind {
	case "literal", "subpath":
		if err := checkPath(f.arg); err != nil {
			return "", err
		}
		return "(" + f.kind + " " + quote(f.arg) + ")", nil
	case "regex":
		if strings.ContainsAny(f.arg, "\"\n") {
			return "", fmt.Errorf("regex %q: %w", f.arg, ErrInexpressible)
		}
		return `(regex #"` + f.arg + `")`, nil
	case "remote-ip":
		return "(remote ip " + quote(f.arg) + ")", nil
	case "unix-socket":
		if err := checkPath(f.arg); err != nil {
			return "", err
		}
		return "(remote unix-socket (path-literal " + quote(f.arg) + "))", nil
	}
	return "", fmt.Errorf("unknown filter kind %q", f.kind)
}

// checkPath refuses a path SBPL cannot name exactly: the kernel compares the resolved,
// absolute path of every access, so anything else would silently match nothing.
func checkPath(p string) error {
	switch {
	case !utf8.ValidString(p):
		return fmt.Errorf("%q is not UTF-8: %w", p, ErrInexpressible)
	case !filepath.IsAbs(p) || filepath.Clean(p) != p:
		return fmt.Errorf("%q is not an absolute clean path: %w", p, ErrInexpressible)
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%q holds a control character: %w", p, ErrInexpressible)
		}
	}
	return nil
}

// quote is the one way a string enters the profile: a TinyScheme string literal, in which
// only the backslash and the double quote need escaping (control characters are refused
// before, by checkPath).
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		if r == '"' || r == '\\' {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	b.WriteByte('"')
	return b.String()
}

// foldRegex is a regex matching p and everything under it with ASCII letters in either
// case: macOS volumes are case-insensitive by default, so ".GIT/config" is ".git/config".
// Denials carry it beside their subpath so that a differently cased spelling of a denied
// path is denied too. (Unicode case and normalization variants are not covered; the
// runner's placeholders make a denied path exist, so the kernel names it as stored.)
func foldRegex(p string) (filter, error) {
	if err := checkPath(p); err != nil {
		return filter{}, err
	}
	if strings.ContainsRune(p, '"') {
		return filter{}, fmt.Errorf("%q holds a double quote: %w", p, ErrInexpressible)
	}
	var b strings.Builder
	b.WriteByte('^')
	for _, r := range p {
		switch {
		case r >= 'a' && r <= 'z':
			b.WriteByte('[')
			b.WriteRune(r)
			b.WriteRune(r - 'a' + 'A')
			b.WriteByte(']')
		case r >= 'A' && r <= 'Z':
			b.WriteByte('[')
			b.WriteRune(r - 'A' + 'a')
			b.WriteRune(r)
			b.WriteByte(']')
		case strings.ContainsRune(`\.+*?()|[]{}^$`, r):
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	if p != "/" {
		b.WriteString("(/|$)")
	}
	return filter{"regex", b.String()}, nil
}

// writer accumulates a profile: rules in order (SBPL's last matching rule decides) with
// comments. The first error sticks and is returned by text.
type writer struct {
	b   strings.Builder
	err error
}

// comment writes a comment line; text that is not ours (a contract's why) is made one
// printable line first.
func (w *writer) comment(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return ' '
		}
		return r
	}, s)
	w.b.WriteString("; " + s + "\n")
}

func (w *writer) blank() { w.b.WriteString("\n") }

// raw writes a fixed form of this package (no caller data).
func (w *writer) raw(form string) { w.b.WriteString(form + "\n") }

// rule writes (action ops... filters...), one filter a line when there are several.
func (w *writer) rule(action string, ops []string, filters ...filter) {
	if w.err != nil {
		return
	}
	head := "(" + action + " " + strings.Join(ops, " ")
	parts := make([]string, 0, len(filters))
	for _, f := range filters {
		s, err := f.render()
		if err != nil {
			w.err = err
			return
		}
		parts = append(parts, s)
	}
	switch len(parts) {
	case 0:
		w.b.WriteString(head + ")\n")
	case 1:
		w.b.WriteString(head + " " + parts[0] + ")\n")
	default:
		w.b.WriteString(head + "\n  " + strings.Join(parts, "\n  ") + ")\n")
	}
}

// deny writes a denial of ops on p and everything under it, in any ASCII case.
func (w *writer) deny(ops []string, p string) {
	f, err := foldRegex(p)
	if err != nil && w.err == nil {
		w.err = err
	}
	w.rule("deny", ops, subpath(p), f)
}

func (w *writer) text() (string, error) { return w.b.String(), w.err }
