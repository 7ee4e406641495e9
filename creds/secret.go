package creds

import (
	"fmt"
	"io"
	"log/slog"
)

// redacted is what a [Secret] shows instead of its value.
const redacted = "[REDACTED]"

// Secret is a credential's value. It cannot be printed, logged or marshalled by
// accident: fmt shows "[REDACTED]" for every verb, slog the same, and JSON, text and
// gob encoding fail with [ErrMarshalSecret]. [Secret.Reveal] is the one way out, for
// the code that delivers the value to the sandbox or presents it to its issuer.
//
// The value sits behind a pointer, so that even a struct that holds a Secret in an
// unexported field (which fmt prints without calling methods) shows an address and not
// the value. Secrets are not comparable (compare what Reveal returns, in constant time,
// if you must). The zero Secret is empty.
type Secret struct {
	_ [0]func() // not comparable: == on secrets is a timing oracle and a smell
	v *string
}

// NewSecret wraps a value.
func NewSecret(value string) Secret { return Secret{v: &value} }

// Reveal returns the value. Call it only where the value is delivered or presented
// to the service that issued it.
func (s Secret) Reveal() string {
	if s.v == nil {
		return ""
	}
	return *s.v
}

// IsZero reports whether the secret is empty.
func (s Secret) IsZero() bool { return s.v == nil || *s.v == "" }

// String implements fmt.Stringer.
func (Secret) String() string { return redacted }

// GoString implements fmt.GoStringer.
func (Secret) GoString() string { return redacted }

// Format implements fmt.Formatter, so that every verb (%v, %+v, %#v, %s, %q, %x, %d…)
// shows "[REDACTED]".
func (Secret) Format(f fmt.State, _ rune) { io.WriteString(f, redacted) }

// LogValue implements slog.LogValuer.
func (Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalJSON implements json.Marshaler by refusing.
func (Secret) MarshalJSON() ([]byte, error) { return nil, ErrMarshalSecret }

// MarshalText implements encoding.TextMarshaler by refusing.
func (Secret) MarshalText() ([]byte, error) { return nil, ErrMarshalSecret }

// GobEncode implements gob.GobEncoder by refusing.
func (Secret) GobEncode() ([]byte, error) { return nil, ErrMarshalSecret }
