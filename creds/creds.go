package creds

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/secret"
)

// Errors returned by the broker and its providers. Test with errors.Is.
var (
	// ErrMarshalSecret: something tried to encode a [Secret] (JSON, text, gob).
	ErrMarshalSecret = secret.ErrMarshal
	// ErrNoProvider: no provider is configured on this host for a credential's
	// provider name (for example vault without VAULT_ADDR); issuing fails the run, and
	// gc keeps the grant in the ledger until the provider is configured or it expires.
	ErrNoProvider = errors.New("credential provider not configured")
	// ErrNoRevokeRef: the ledger holds no revoke reference for a grant, because cordon
	// stopped while issuing it. Only its expiry ends it.
	ErrNoRevokeRef = errors.New("no revoke reference recorded")
	// ErrNotRevoked: revocation failed after every retry. The grant stays in the
	// ledger (gc retries), and an alert was emitted and printed.
	ErrNotRevoked = errors.New("credential NOT revoked")
	// ErrLedger: the ledger directory is unusable (not private, unreadable, a record
	// that does not parse).
	ErrLedger = errors.New("credential ledger")
)

// DefaultTTL is a credential's lifetime when the contract gives no ttl.
const DefaultTTL = time.Hour

// IssueError says which credential could not be issued, and why.
type IssueError struct {
	Name     string // the contract's name for the credential
	Provider string
	Err      error
}

func (e *IssueError) Error() string {
	return fmt.Sprintf("credential %s (%s): %v", e.Name, e.Provider, e.Err)
}

func (e *IssueError) Unwrap() error { return e.Err }

// Grant is one issued credential.
type Grant struct {
	Run      string           // the run it was issued to
	Name     string           // the contract's name: the variable or file it is delivered as
	Provider string           // local, exec, github-app, vault
	Deliver  contract.Deliver // env, file or proxy
	Scope    map[string]any   // the scope the contract declared
	// ID identifies the grant in events and logs; it is safe to show. It is the
	// provider's own identifier when it has one that is not a credential (the id an
	// exec mint command printed), else [Fingerprint] of the value.
	ID        string
	IssuedAt  time.Time
	ExpiresAt time.Time // as the issuer reports it, which may differ from the ttl asked for
	Secret    Secret    // zero in the grants the broker passes to Revoke
	// RevokeRef is what Revoke needs, opaque to the broker and kept in the ledger (a
	// file of mode 0600): a Vault accessor, the id an exec mint printed, a local
	// token's hash, a GitHub token sealed under a key derived from the app's key. A
	// provider never puts a usable credential here in clear.
	RevokeRef string
}

// Provider issues and revokes one kind of credential. The broker is its only caller;
// implementations must be safe for concurrent use.
type Provider interface {
	// Issue mints a credential narrowed to args.Credential.Scope, living at most
	// args.Credential.TTL where the issuer allows it. It sets Secret, ExpiresAt and
	// RevokeRef (and ID if it has a safe one); the broker fills in the rest. If Issue
	// fails after the issuer minted something, it revokes that itself.
	Issue(ctx context.Context, args IssueArgs) (Grant, error)
	// Revoke ends a grant. It receives the grant as the ledger recorded it (Secret is
	// zero; RevokeRef is empty if cordon stopped while issuing) and must be
	// idempotent: a grant already revoked or expired is not an error.
	Revoke(ctx context.Context, g Grant) error
}

// IssueArgs are the arguments of [Provider.Issue]. A struct, so that the interface
// stays stable as fields are added.
type IssueArgs struct {
	Run        string              // the run id
	Credential contract.Credential // TTL and Deliver already defaulted
	Now        time.Time           // the broker's clock: base expiry and JWT times on it
}

// Sweeper is implemented by providers that keep state of their own to expire (the
// local token store). [Broker.Reconcile] calls Sweep after settling the ledger.
type Sweeper interface {
	Sweep(now time.Time) error
}

// Fingerprint is the ID the broker gives a grant whose provider has no safe id of its
// own: "sha256:" and the first 16 hex digits of the SHA-256 of the value. Logging it
// reveals nothing usable about a high-entropy token.
func Fingerprint(value string) string {
	sum := sha256.Sum256([]byte(value))
	return "sha256:" + hex.EncodeToString(sum[:8])
}

func hashHex(value string) string {
	sum := sha256.Sum256([]byte(value))
	return hex.EncodeToString(sum[:])
}
