package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/cordonhq/cordon/internal/secret"
)

// MinSecretLen is the shortest secret value a [Redactor] accepts. Replacing shorter
// strings everywhere would shred the log (and such a value is no credential anyway).
const MinSecretLen = 4

var secretName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`) })

// Redactor replaces secret values by "[REDACTED:NAME]": the values as they are, and
// every form the egress proxy may make of them (see [secret.Matcher]: base64 of text
// holding a value, hex, in any letter case, percent-encoded), so that a destination's
// echo quoted in an error is no more recorded than the value. A form found only once
// percent-encoding is undone redacts the whole string that holds it.
//
// A Redactor is safe for concurrent use: the broker may add a secret while events are
// being written. Secrets added later do not change lines already written.
type Redactor struct {
	// mu guards the fields below.
	mu      sync.RWMutex
	names   map[string]string // value → name
	rep     *strings.Replacer // raw values, longest first; nil when empty
	markers [][]byte          // raw and JSON-escaped forms of every value, for detection
	forms   *secret.Matcher   // every form the proxy may make of every value
}

// NewRedactor returns an empty Redactor.
func NewRedactor() *Redactor { return &Redactor{names: make(map[string]string)} }

// Add registers value under name. The value must be valid UTF-8 of at least
// [MinSecretLen] bytes; the name must match [A-Za-z0-9_.-]{1,64}. Adding a known value
// again renames it.
func (r *Redactor) Add(name, value string) error {
	switch {
	case !secretName().MatchString(name):
		return fmt.Errorf("%w: name %q must match %s", ErrBadSecret, name, secretName())
	case len(value) < MinSecretLen:
		return fmt.Errorf("%w: %s: value shorter than %d bytes", ErrBadSecret, name, MinSecretLen)
	case !utf8.ValidString(value):
		return fmt.Errorf("%w: %s: value is not valid UTF-8", ErrBadSecret, name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.names[value] = name
	r.rebuildLocked()
	return nil
}

func (r *Redactor) rebuildLocked() {
	values := make([]string, 0, len(r.names))
	for v := range r.names {
		values = append(values, v)
	}
	// Longest first, so that a secret containing another is replaced whole.
	slices.SortFunc(values, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	pairs := make([]string, 0, 2*len(values))
	r.markers = r.markers[:0]
	named := make([]secret.Named, 0, len(values))
	for _, v := range values {
		named = append(named, secret.Named{Name: r.names[v], Value: v})
		pairs = append(pairs, v, "[REDACTED:"+r.names[v]+"]")
		r.markers = append(r.markers, []byte(v))
		if esc := jsonEscaped(v); esc != v {
			r.markers = append(r.markers, []byte(esc))
		}
	}
	r.rep = strings.NewReplacer(pairs...)
	r.forms = secret.NewMatcher(named...)
}

// jsonEscaped returns v as it appears between the quotes of a JSON string written by
// this package's encoder.
func jsonEscaped(v string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // a string always encodes
	s := strings.TrimSuffix(b.String(), "\n")
	return s[1 : len(s)-1]
}

// Redact returns s with every secret value, in any of its forms, replaced.
func (r *Redactor) Redact(s string) string {
	r.mu.RLock()
	rep, forms := r.rep, r.forms
	r.mu.RUnlock()
	if rep == nil {
		return s
	}
	return forms.Replace(rep.Replace(s), redactedName)
}

func redactedName(name string) string { return "[REDACTED:" + name + "]" }

// RedactBytes returns b with every secret value replaced; b itself is not modified.
func (r *Redactor) RedactBytes(b []byte) []byte {
	r.mu.RLock()
	rep, forms := r.rep, r.forms
	r.mu.RUnlock()
	if rep == nil || !r.mayContain(b) {
		return b
	}
	return []byte(forms.Replace(rep.Replace(string(b)), redactedName))
}

// mayContain reports whether b may hold a secret, in raw or JSON-escaped form or any
// form of [secret.Matcher]. JSON with
// any \u or \/ escape is always suspect, since the same character can be escaped in
// more than one way.
func (r *Redactor) mayContain(b []byte) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if len(r.markers) == 0 {
		return false
	}
	for _, m := range r.markers {
		if bytes.Contains(b, m) {
			return true
		}
	}
	if _, ok := r.forms.Find(string(b)); ok {
		return true
	}
	return bytes.Contains(b, []byte(`\u`)) || bytes.Contains(b, []byte(`\/`))
}

// trimPartial removes from the end of s any proper prefix of a secret, so that cutting a
// stream at an arbitrary byte never logs the first half of a credential.
func (r *Redactor) trimPartial(s string) string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	cut := len(s)
	for v := range r.names {
		for k := min(len(v)-1, len(s)); k > 0; k-- {
			if strings.HasSuffix(s, v[:k]) {
				cut = min(cut, len(s)-k)
				break
			}
		}
	}
	return s[:cut]
}

// redactJSON returns the JSON value src with every string (object keys included)
// redacted, keeping member order and numbers exactly; src must be valid JSON.
func (r *Redactor) redactJSON(src []byte) ([]byte, error) {
	if !r.mayContain(src) {
		return src, nil
	}
	dec := json.NewDecoder(bytes.NewReader(src))
	dec.UseNumber()
	type frame struct {
		object bool
		n      int // tokens written in this container (keys and values for objects)
	}
	var stack []frame
	var out bytes.Buffer
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("redacting body: %w", err)
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			out.WriteByte(byte(d))
			if len(stack) == 0 {
				return out.Bytes(), nil
			}
			continue
		}
		if len(stack) > 0 {
			top := &stack[len(stack)-1]
			switch {
			case top.object && top.n%2 == 1:
				out.WriteByte(':')
			case top.n > 0:
				out.WriteByte(',')
			}
			top.n++
		}
		switch v := tok.(type) {
		case json.Delim:
			out.WriteByte(byte(v))
			stack = append(stack, frame{object: v == '{'})
			continue
		case string:
			if err := writeJSONString(&out, r.Redact(v)); err != nil {
				return nil, err
			}
		case json.Number:
			out.WriteString(string(v))
		case bool, nil:
			b, _ := json.Marshal(v)
			out.Write(b)
		}
		if len(stack) == 0 {
			return out.Bytes(), nil // a scalar body
		}
	}
}

// writeJSONString appends s as a JSON string, without HTML escaping.
func writeJSONString(b *bytes.Buffer, s string) error {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return err
	}
	b.Truncate(b.Len() - 1) // the encoder's newline
	return nil
}
