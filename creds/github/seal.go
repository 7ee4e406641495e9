package github

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"strings"
)

// An installation token can only be revoked with itself (DELETE /installation/token),
// so the ledger must keep it to revoke after a crash. It keeps it sealed (AES-256-GCM)
// under a key derived from the app's private key, bound to its run and name: a copy of
// the ledger without the app key yields no usable token, and whoever holds the app key
// can mint tokens anyway.

const refPrefix = "v1."

// sealKey derives the sealing key from the app's private key.
func sealKey(key *rsa.PrivateKey) (cipher.AEAD, error) {
	k, err := hkdf.Key(sha256.New, x509.MarshalPKCS1PrivateKey(key), nil, "cordon github-app ledger revoke reference v1", 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(k)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

func aad(run, name string) []byte { return []byte(run + "\x00" + name) }

func seal(aead cipher.AEAD, token, run, name string) string {
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(token)+aead.Overhead())
	rand.Read(nonce)
	return refPrefix + base64.RawURLEncoding.EncodeToString(aead.Seal(nonce, nonce, []byte(token), aad(run, name)))
}

var errBadRef = errors.New("cannot open the revoke reference (was the app key replaced?)")

func open(aead cipher.AEAD, ref, run, name string) (string, error) {
	b64, ok := strings.CutPrefix(ref, refPrefix)
	if !ok {
		return "", errBadRef
	}
	data, err := base64.RawURLEncoding.DecodeString(b64)
	if err != nil || len(data) < aead.NonceSize() {
		return "", errBadRef
	}
	tok, err := aead.Open(nil, data[:aead.NonceSize()], data[aead.NonceSize():], aad(run, name))
	if err != nil {
		return "", errBadRef
	}
	return string(tok), nil
}
