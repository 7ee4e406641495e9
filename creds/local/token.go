// Package local is cordon's own issuer, for internal services that trust cordon:
// random 256-bit opaque tokens ("cordon_…"), bound to a run, a credential name, scope
// strings and an expiry, and stored only as their SHA-256 in a token store under the
// ledger root. [Verify] and the RFC 7662 introspection [Handler] let an internal
// service check a token; [Provider] issues and revokes them for the broker.
package local

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash/crc32"
	"strings"
)

// TokenPrefix starts every local token, so that scanners and humans recognise one.
const TokenPrefix = "cordon_"

// A token is TokenPrefix, 64 lowercase hex digits of randomness (256 bits) and 8 of a
// CRC-32 of them, which tells a mistyped or truncated token from a revoked one
// without looking anything up.
const (
	randHex  = 64
	sumHex   = 8
	tokenLen = len(TokenPrefix) + randHex + sumHex
)

func newToken() string {
	var b [32]byte
	rand.Read(b[:]) // never returns an error (crypto/rand, Go 1.24+)
	body := hex.EncodeToString(b[:])
	return TokenPrefix + body + checksum(body)
}

func checksum(body string) string {
	var s [4]byte
	binary.BigEndian.PutUint32(s[:], crc32.ChecksumIEEE([]byte(body)))
	return hex.EncodeToString(s[:])
}

// wellFormed reports whether tok has a local token's shape and checksum.
func wellFormed(tok string) bool {
	rest, ok := strings.CutPrefix(tok, TokenPrefix)
	if !ok || len(tok) != tokenLen {
		return false
	}
	for _, c := range rest {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return checksum(rest[:randHex]) == rest[randHex:]
}

// tokenHash is the store's key for a token: its SHA-256 in hex.
func tokenHash(tok string) string {
	sum := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(sum[:])
}

// tokenID is the token's public identifier (the grant's ID, introspection's jti): the
// same as creds.Fingerprint of the token.
func tokenID(hash string) string { return "sha256:" + hash[:16] }

func isHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}
