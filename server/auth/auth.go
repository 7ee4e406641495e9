// Package auth maps what a caller of `cordon serve` presents (a bearer token, a
// verified client certificate, the uid of a local peer) to the one credential of the
// config it stands for. It decides who the caller is, not what it may do: roles are
// checked by the handlers.
//
// Tokens are random 32-byte values, so a fast hash is the right one: nobody can guess
// a preimage of SHA-256 over 256 random bits, and a slow password hash would only make
// every request cost more. The config stores only the hash; a presented token is
// hashed and compared with every configured hash in constant time (crypto/subtle),
// so the time taken says nothing of which hash, or how much of one, it matched.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"strings"

	"github.com/cordonhq/cordon/server/config"
)

// Identity is the credential a request was authenticated as.
type Identity struct {
	Tenant     string
	Credential string
	Roles      config.Roles
}

// MaxTokenLen bounds a presented token: cordon's are 43 characters, and hashing
// whatever a client sends would be work it chooses.
const MaxTokenLen = 512

// Authenticator knows every credential of a config. It is immutable once made, and
// safe for concurrent use.
type Authenticator struct {
	tokens []tokenEntry
	certs  map[string]Identity // by config.CertIdentity.Key
	uids   map[uint32]Identity
}

type tokenEntry struct {
	sum [32]byte
	id  Identity
}

// New indexes the credentials of cfg (a config [config.Parse] accepted: each identity
// maps to one credential).
func New(cfg *config.Config) *Authenticator {
	a := &Authenticator{certs: map[string]Identity{}, uids: map[uint32]Identity{}}
	for _, t := range cfg.Tenants {
		for _, c := range t.Credentials {
			id := Identity{Tenant: t.Name, Credential: c.Name, Roles: c.Roles}
			switch {
			case c.TokenSHA256 != nil:
				a.tokens = append(a.tokens, tokenEntry{sum: *c.TokenSHA256, id: id})
			case c.ClientCert != nil:
				a.certs[c.ClientCert.Key()] = id
			case c.UID != nil:
				a.uids[*c.UID] = id
			}
		}
	}
	return a
}

// Token is the credential whose hash matches token. Every configured hash is compared,
// in constant time, whatever matched first.
func (a *Authenticator) Token(token string) (Identity, bool) {
	if token == "" || len(token) > MaxTokenLen {
		return Identity{}, false
	}
	sum := sha256.Sum256([]byte(token))
	found := -1
	for i := range a.tokens {
		if subtle.ConstantTimeCompare(sum[:], a.tokens[i].sum[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Identity{}, false
	}
	return a.tokens[found].id, true
}

// Cert is the credential a verified client certificate stands for: by its subject's
// common name for a credential naming a common_name, by one of its SANs (DNS names,
// email addresses, URIs) for one naming a san, never the one for the other. A
// certificate whose names match two credentials stands for none: which tenant it is
// would be a guess.
func (a *Authenticator) Cert(leaf *x509.Certificate) (Identity, bool) {
	if leaf == nil {
		return Identity{}, false
	}
	keys := []string{"cn:" + leaf.Subject.CommonName}
	if leaf.Subject.CommonName == "" {
		keys = nil
	}
	sans := append(append([]string{}, leaf.DNSNames...), leaf.EmailAddresses...)
	for _, u := range leaf.URIs {
		sans = append(sans, u.String())
	}
	for _, n := range sans {
		if n != "" {
			keys = append(keys, "san:"+n)
		}
	}
	var (
		id    Identity
		found = 0
		seen  = map[string]bool{}
	)
	for _, k := range keys {
		if seen[k] {
			continue
		}
		seen[k] = true
		if got, ok := a.certs[k]; ok {
			if found > 0 && got != id {
				return Identity{}, false
			}
			id, found = got, found+1
		}
	}
	return id, found > 0
}

// UID is the credential of the local user uid (the peer of a unix connection).
func (a *Authenticator) UID(uid int) (Identity, bool) {
	if uid < 0 || uid > int(^uint32(0)) {
		return Identity{}, false
	}
	id, ok := a.uids[uint32(uid)]
	return id, ok
}

// Bearer is the token of an Authorization header value ("Bearer TOKEN", the scheme
// case-insensitive, RFC 6750), and whether it was one.
func Bearer(header string) (string, bool) {
	scheme, tok, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// NewToken makes a fresh token (32 random bytes, base64url) and the hex SHA-256 of it
// that the config's token_sha256 holds.
func NewToken() (token, sum string) {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24)
	token = base64.RawURLEncoding.EncodeToString(b[:])
	s := sha256.Sum256([]byte(token))
	return token, hex.EncodeToString(s[:])
}
