package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cordonhq/cordon/creds"
	"github.com/cordonhq/cordon/creds/internal/scope"
	"github.com/cordonhq/cordon/internal/atomicfile"
)

// Provider issues local tokens. It implements [creds.Provider] and [creds.Sweeper],
// and is safe for concurrent use.
//
// Scope (in the contract): scopes, a non-empty list of strings the token carries,
// which [Verify] and introspection report (for example [read:artifacts]).
type Provider struct {
	dir string
}

// New returns a provider keeping its tokens under root, the ledger's root
// (creds.Config.Root): the same root [Verify] and [NewHandler] read.
func New(root string) (*Provider, error) {
	dir := storeDir(root)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("local token store: %w", err)
	}
	return &Provider{dir: dir}, nil
}

// Issue implements creds.Provider: a fresh token, stored as its hash only.
func (p *Provider) Issue(_ context.Context, args creds.IssueArgs) (creds.Grant, error) {
	c := args.Credential
	r := scope.New("credentials "+c.Name+": scope", c.Scope)
	scopes := r.Strings("scopes", true)
	if err := r.Err(); err != nil {
		return creds.Grant{}, err
	}
	for _, s := range scopes {
		if !validScope(s) {
			return creds.Grant{}, fmt.Errorf("credentials %s: scope.scopes: %q is not a scope token (printable ASCII, no spaces, quotes or backslashes)", c.Name, s)
		}
	}
	tok := newToken()
	hash := tokenHash(tok)
	exp := args.Now.Add(c.TTL)
	e := entry{V: storeVersion, Run: args.Run, Name: c.Name, Scopes: scopes, IssuedAt: args.Now, ExpiresAt: exp}
	if err := writeEntry(p.dir, hash, e); err != nil {
		return creds.Grant{}, fmt.Errorf("local token store: %w", err)
	}
	return creds.Grant{Secret: creds.NewSecret(tok), ID: tokenID(hash), ExpiresAt: exp, RevokeRef: hash}, nil
}

// validScope: RFC 6749 scope-token characters.
func validScope(s string) bool {
	for _, c := range s {
		if c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return s != ""
}

// Revoke implements creds.Provider: the token's entry is removed, so that it no
// longer verifies. Without a reference (cordon stopped while issuing), every token of
// the grant's run and name is removed.
func (p *Provider) Revoke(_ context.Context, g creds.Grant) error {
	if g.RevokeRef != "" {
		if !isHash(g.RevokeRef) {
			return fmt.Errorf("local token store: bad revoke reference")
		}
		return atomicfile.Remove(entryPath(p.dir, g.RevokeRef))
	}
	return each(p.dir, func(hash string, e entry) error {
		if e.Run == g.Run && e.Name == g.Name {
			return atomicfile.Remove(entryPath(p.dir, hash))
		}
		return nil
	})
}

// Sweep implements creds.Sweeper: entries of expired tokens are removed.
func (p *Provider) Sweep(now time.Time) error {
	err := each(p.dir, func(hash string, e entry) error {
		if !now.Before(e.ExpiresAt) {
			return atomicfile.Remove(entryPath(p.dir, hash))
		}
		return nil
	})
	if err != nil {
		return errors.Join(errors.New("sweeping the local token store"), err)
	}
	return nil
}
