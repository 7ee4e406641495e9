package secret

import (
	"encoding/base64"
	"encoding/hex"
	"slices"
	"strings"
)

// Forms. The egress proxy writes a credential's value into requests in more than one
// form: as itself (a header value, "Bearer VALUE") and inside base64 of text around it
// ("Basic base64(user:VALUE)"). [Encodings] lists every encoding it may use, and the
// proxy encodes only through [Encoding.Encode]; a [Matcher] derives from each value the
// strings that reveal it in any of them, so that what the proxy injects and what it (and
// the audit log) scrubs come from one list and cannot drift apart.

// Encoding is a way the proxy writes a value into a request.
type Encoding int

const (
	// Raw is the value itself, anywhere in a header value ("Bearer VALUE").
	Raw Encoding = iota
	// Base64 is standard base64 (with padding) of text that holds the value, the text
	// around it chosen by the sandbox ("Basic base64(user:VALUE)").
	Base64
)

// Encodings is every Encoding the proxy uses. A Matcher covers each of them.
var Encodings = []Encoding{Raw, Base64}

// String implements fmt.Stringer.
func (e Encoding) String() string {
	switch e {
	case Raw:
		return "raw"
	case Base64:
		return "base64"
	}
	return "unknown"
}

// Encode returns s in encoding e, as the proxy writes it.
func (e Encoding) Encode(s string) string {
	if e == Base64 {
		return base64.StdEncoding.EncodeToString([]byte(s))
	}
	return s
}

// needles returns the lower-cased strings that reveal value in encoding e, whatever the
// text around it.
//
// For Raw: the value, and its hex. For Base64 the sandbox chooses the text before the
// value, so the value may start at any of the three byte offsets of a base64 group: for
// each, the characters that encode the value's bits alone, in the standard and the
// URL-safe alphabet (padding never falls inside them). The characters at either edge mix
// the value's bits with the text around it; pad says how many there are (0 or 1 each
// side), so that redaction can take them too.
func (e Encoding) needles(value string) []needle {
	switch e {
	case Raw:
		return []needle{{s: lowerASCII(value)}, {s: hex.EncodeToString([]byte(value))}}
	case Base64:
		var out []needle
		n := len(value)
		for off := range 3 {
			buf := append(make([]byte, off, off+n), value...)
			first := (8*off + 5) / 6 // first character wholly inside the value
			last := (8 * (off + n)) / 6
			if last <= first {
				continue
			}
			nd := needle{padL: b2i(8*off%6 != 0), padR: b2i(8*(off+n)%6 != 0)}
			for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
				nd.s = lowerASCII(enc.EncodeToString(buf)[first:last])
				out = append(out, nd)
			}
		}
		return out
	}
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// needle is one string that reveals a named value.
type needle struct {
	s          string // lower-cased
	name       string
	padL, padR int // characters at each edge that carry some of the value's bits
}

// Named is a value with the name it is reported under (never the value).
type Named struct {
	Name, Value string
}

// Matcher finds values in any form an [Encoding] makes of them, in any letter case and
// percent-encoded (any mix of escaped and literal bytes, escapes nested up to
// [maxUnescape] deep). A Matcher is immutable and safe for concurrent use.
type Matcher struct {
	needles []needle          // longest first
	pieces  map[string]string // every PieceLen-character piece of a needle → its name
}

// PieceLen is the length of the pieces [Matcher.FindPiece] looks for: a destination that
// echoes a value cut in parts (split across headers, truncated) shows the sandbox pieces
// of it; each piece this long is refused. Shorter ones (the prefix a placeholder shares
// with its value, the last characters an API shows of a token) are not.
const PieceLen = 16

// maxUnescape bounds how many rounds of percent-decoding Find undoes.
const maxUnescape = 4

// NewMatcher returns a Matcher for values; empty values are ignored.
func NewMatcher(values ...Named) *Matcher {
	m := &Matcher{}
	seen := map[string]bool{}
	for _, v := range values {
		if v.Value == "" {
			continue
		}
		for _, e := range Encodings {
			for _, nd := range e.needles(v.Value) {
				if nd.s == "" || seen[nd.s] {
					continue
				}
				seen[nd.s] = true
				nd.name = v.Name
				m.needles = append(m.needles, nd)
			}
		}
	}
	slices.SortStableFunc(m.needles, func(a, b needle) int { return len(b.s) - len(a.s) })
	m.pieces = map[string]string{}
	for _, nd := range m.needles {
		for i := 0; i+PieceLen <= len(nd.s); i++ {
			m.pieces[nd.s[i:i+PieceLen]] = nd.name
		}
	}
	return m
}

// FindPiece is [Matcher.Find] that also finds any piece of [PieceLen] characters of a
// form, under the same case and percent-encoding variants: for text the sandbox is
// about to see, where a value cut in parts is as good as whole.
func (m *Matcher) FindPiece(s string) (string, bool) {
	if name, ok := m.Find(s); ok || m.Empty() {
		return name, ok
	}
	low := lowerASCII(s)
	for range maxUnescape + 1 {
		for i := 0; i+PieceLen <= len(low); i++ {
			if name, ok := m.pieces[low[i:i+PieceLen]]; ok {
				return name, true
			}
		}
		next := unescape(low)
		if next == low {
			break
		}
		low = next
	}
	return "", false
}

// Empty reports whether m matches nothing.
func (m *Matcher) Empty() bool { return m == nil || len(m.needles) == 0 }

// Find reports whether s holds a value in any form, and the name of the first found.
func (m *Matcher) Find(s string) (string, bool) {
	if m.Empty() {
		return "", false
	}
	low := lowerASCII(s)
	for range maxUnescape + 1 {
		for _, nd := range m.needles {
			if strings.Contains(low, nd.s) {
				return nd.name, true
			}
		}
		next := unescape(low)
		if next == low {
			break
		}
		low = next
	}
	return "", false
}

// Replace returns s with every form of a value found in it, in any letter case, replaced
// by repl(name), edge characters included. A value found only once percent-decoding is
// undone cannot be cut out where it lies: then the whole of s is repl(name).
func (m *Matcher) Replace(s string, repl func(name string) string) string {
	if m.Empty() {
		return s
	}
	low := lowerASCII(s)
	type span struct {
		i, j int
		name string
	}
	var spans []span
	for _, nd := range m.needles {
		for from := 0; ; {
			k := strings.Index(low[from:], nd.s)
			if k < 0 {
				break
			}
			i, j := from+k, from+k+len(nd.s)
			spans = append(spans, span{max(i-nd.padL, 0), min(j+nd.padR, len(s)), nd.name})
			from = i + 1
		}
	}
	if len(spans) > 0 {
		slices.SortStableFunc(spans, func(a, b span) int {
			if a.i != b.i {
				return a.i - b.i
			}
			return b.j - a.j
		})
		var b strings.Builder
		at := 0
		for k := 0; k < len(spans); {
			sp := spans[k]
			for k++; k < len(spans) && spans[k].i < sp.j; k++ {
				sp.j = max(sp.j, spans[k].j) // overlapping forms are cut out as one
			}
			b.WriteString(s[at:sp.i])
			b.WriteString(repl(sp.name))
			at = sp.j
		}
		b.WriteString(s[at:])
		s = b.String()
	}
	if name, ok := m.Find(s); ok {
		return repl(name)
	}
	return s
}

// lowerASCII lower-cases the ASCII letters of s, byte for byte, so that offsets in the
// result are offsets in s.
func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if c := b[j]; c >= 'A' && c <= 'Z' {
					b[j] = c + 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// unescape decodes every %XX escape of s (either case of hex digit), leaving malformed
// ones as they are, and lower-cases what it decoded.
func unescape(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && ishex(s[i+1]) && ishex(s[i+2]) {
			c := unhex(s[i+1])<<4 | unhex(s[i+2])
			if c >= 'A' && c <= 'Z' {
				c += 'a' - 'A'
			}
			b = append(b, c)
			i += 2
			continue
		}
		b = append(b, s[i])
	}
	return string(b)
}

func ishex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// Decode undoes Encode.
func (e Encoding) Decode(s string) (string, error) {
	if e == Base64 {
		b, err := base64.StdEncoding.DecodeString(s)
		return string(b), err
	}
	return s, nil
}
