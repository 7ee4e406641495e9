package local

import (
	"errors"
	"os"
	"slices"
	"time"
)

// ErrInactive: the token is not active (malformed, unknown, revoked, expired, or
// without a required scope). Test with errors.Is; [*InactiveError] says which.
var ErrInactive = errors.New("token is not active")

// InactiveError says why a token is not active. The reason is for the operator who
// holds the token (`cordon token verify`); introspection never shows it.
type InactiveError struct {
	Reason string // malformed, unknown or revoked, expired, missing scope "S"
}

func (e *InactiveError) Error() string        { return ErrInactive.Error() + ": " + e.Reason }
func (e *InactiveError) Is(target error) bool { return target == ErrInactive }

// Info describes an active token. None of it is secret.
type Info struct {
	Run       string    `json:"run"`  // the run it was issued to
	Name      string    `json:"name"` // the credential's name in the contract
	ID        string    `json:"id"`   // the grant's ID in the run's audit log
	Scopes    []string  `json:"scopes"`
	IssuedAt  time.Time `json:"issued_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Verify checks token against the store of the ledger at root: it is active if it was
// issued, has not been revoked, now is before its expiry, and it carries every scope
// in required. An inactive token gives an error matching [ErrInactive]; other errors
// (an unreadable store) mean the answer is unknown.
func Verify(root, token string, required []string, now time.Time) (Info, error) {
	if !wellFormed(token) {
		return Info{}, &InactiveError{Reason: "malformed"}
	}
	hash := tokenHash(token)
	e, err := readEntry(storeDir(root), hash)
	if errors.Is(err, os.ErrNotExist) {
		return Info{}, &InactiveError{Reason: "unknown or revoked"}
	}
	if err != nil {
		return Info{}, err
	}
	if !now.Before(e.ExpiresAt) {
		return Info{}, &InactiveError{Reason: "expired at " + e.ExpiresAt.UTC().Format(time.RFC3339)}
	}
	for _, s := range required {
		if !slices.Contains(e.Scopes, s) {
			return Info{}, &InactiveError{Reason: "missing scope " + `"` + s + `"`}
		}
	}
	return Info{Run: e.Run, Name: e.Name, ID: tokenID(hash), Scopes: e.Scopes, IssuedAt: e.IssuedAt, ExpiresAt: e.ExpiresAt}, nil
}
