// Package secret holds [Value], the opaque type a credential's value travels in from its
// issuer to the point of delivery (the file a backend writes on the sandbox's tmpfs, the
// header the egress proxy injects). It is a leaf: it imports only the standard library,
// so that the backends and the proxy can carry secrets without linking the broker.
package secret

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
)

// ErrMarshal: something tried to encode a [Value] (JSON, text, gob).
var ErrMarshal = errors.New("refusing to marshal a secret")

// redacted is what a [Value] shows instead of its value.
const redacted = "[REDACTED]"

// Value is a secret value. It cannot be printed, logged or marshalled by accident: fmt
// shows "[REDACTED]" for every verb, slog the same, and JSON, text and gob encoding fail
// with [ErrMarshal]. [Value.Reveal] is the one way out, for the code that delivers the
// value to the sandbox or presents it to its issuer.
//
// The value sits behind a pointer, so that even a struct that holds a Value in an
// unexported field (which fmt prints without calling methods) shows an address and not
// the value. Values are not comparable (compare what Reveal returns, in constant time,
// if you must). The zero Value is empty.
type Value struct {
	_ [0]func() // not comparable: == on secrets is a timing oracle and a smell
	v *string
}

// New wraps a value.
func New(value string) Value { return Value{v: &value} }

// Reveal returns the value. Call it only where the value is delivered or presented
// to the service that issued it.
func (s Value) Reveal() string {
	if s.v == nil {
		return ""
	}
	return *s.v
}

// IsZero reports whether the value is empty.
func (s Value) IsZero() bool { return s.v == nil || *s.v == "" }

// String implements fmt.Stringer.
func (Value) String() string { return redacted }

// GoString implements fmt.GoStringer.
func (Value) GoString() string { return redacted }

// Format implements fmt.Formatter, so that every verb (%v, %+v, %#v, %s, %q, %x, %d…)
// shows "[REDACTED]".
func (Value) Format(f fmt.State, _ rune) { io.WriteString(f, redacted) }

// LogValue implements slog.LogValuer.
func (Value) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalJSON implements json.Marshaler by refusing.
func (Value) MarshalJSON() ([]byte, error) { return nil, ErrMarshal }

// MarshalText implements encoding.TextMarshaler by refusing.
func (Value) MarshalText() ([]byte, error) { return nil, ErrMarshal }

// GobEncode implements gob.GobEncoder by refusing.
func (Value) GobEncode() ([]byte, error) { return nil, ErrMarshal }
