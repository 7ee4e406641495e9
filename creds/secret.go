package creds

import "github.com/cordonhq/cordon/internal/secret"

// Secret is a credential's value: the opaque [secret.Value], which the broker's grants,
// the sandbox's secret files (sandbox.SecretFile) and the proxy's credentials
// (egress.Credential) all hold, so that it is revealed only where it is delivered. It
// cannot be printed, logged or marshalled by accident: fmt shows "[REDACTED]" for every
// verb, slog the same, and JSON, text and gob encoding fail with [ErrMarshalSecret].
// Secret.Reveal is the one way out. The zero Secret is empty.
type Secret = secret.Value

// NewSecret wraps a value.
func NewSecret(value string) Secret { return secret.New(value) }
