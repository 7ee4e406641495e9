package github

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"time"
)

// JWT lifetimes: GitHub refuses an app JWT that expires more than 10 minutes after it
// was issued, and recommends backdating iat by 60 seconds against clock drift.
const (
	jwtBackdate = 60 * time.Second
	jwtLifetime = 9 * time.Minute // after now: 10 minutes after iat
)

// appJWT returns the app's JSON Web Token (RS256) for now.
func appJWT(appID string, key *rsa.PrivateKey, now time.Time) (string, error) {
	enc := base64.RawURLEncoding
	header := enc.EncodeToString([]byte(`{"alg":"RS256","typ":"JWT"}`))
	claims, err := json.Marshal(struct {
		IssuedAt  int64  `json:"iat"`
		ExpiresAt int64  `json:"exp"`
		Issuer    string `json:"iss"`
	}{now.Add(-jwtBackdate).Unix(), now.Add(jwtLifetime).Unix(), appID})
	if err != nil {
		return "", err
	}
	signed := header + "." + enc.EncodeToString(claims)
	sum := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(nil, key, crypto.SHA256, sum[:])
	if err != nil {
		return "", fmt.Errorf("signing the app JWT: %w", err)
	}
	return signed + "." + enc.EncodeToString(sig), nil
}

// ParseKey parses a GitHub App's private key: the PEM file GitHub hands out
// ("RSA PRIVATE KEY", PKCS #1) or a PKCS #8 "PRIVATE KEY".
func ParseKey(data []byte) (*rsa.PrivateKey, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("github app key: no PEM block")
	}
	switch block.Type {
	case "RSA PRIVATE KEY":
		return x509.ParsePKCS1PrivateKey(block.Bytes)
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, err
		}
		if rk, ok := k.(*rsa.PrivateKey); ok {
			return rk, nil
		}
		return nil, fmt.Errorf("github app key: want an RSA key, got %T", k)
	}
	return nil, fmt.Errorf("github app key: unexpected PEM block %q", block.Type)
}
