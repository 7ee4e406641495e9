// Package github is the github-app credential provider: a GitHub App installation
// access token narrowed to the contract's repositories and permissions, revoked with
// DELETE /installation/token when the run ends.
//
// Scope (in the contract):
//
//	scope:
//	  repositories: [cordon, website]           # names, without the owner; required
//	  permissions: {contents: read, pull_requests: write}   # required
//
// GitHub fixes an installation token's life at one hour; a shorter ttl is honoured by
// revoking at the end of the run, and the grant records the expiry GitHub reports.
// A token GitHub grants wider than asked (more repositories, a permission not asked
// for or at a higher level) is revoked at once and the run fails.
package github

import (
	"bytes"
	"context"
	"crypto/cipher"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cordonhq/cordon/creds"
	"github.com/cordonhq/cordon/creds/internal/scope"
	"github.com/cordonhq/cordon/internal/errdefs"
)

// DefaultAPIURL is GitHub's REST API. GitHub Enterprise Server's is https://HOST/api/v3.
const DefaultAPIURL = "https://api.github.com"

// apiVersion is the REST API version the requests are written against.
const apiVersion = "2022-11-28"

// Config configures the provider (host-side configuration; nothing of it enters the
// sandbox). Zero fields mean defaults where a default is given.
type Config struct {
	// APIURL is the REST API's base URL; "" means [DefaultAPIURL].
	APIURL string
	// AppID identifies the app in its JWT (iss): the app ID or its client ID. Required.
	AppID string
	// InstallationID is the installation whose tokens are minted. Required.
	InstallationID int64
	// Key is the app's private key ([ParseKey]). Required.
	Key *rsa.PrivateKey
	// HTTPClient makes the requests; nil means a client with a 30 s timeout. Redirects
	// are never followed either way.
	HTTPClient *http.Client
}

// Provider mints installation tokens. It implements [creds.Provider] and is safe for
// concurrent use.
type Provider struct {
	cfg    Config
	api    string
	client *http.Client
	aead   cipher.AEAD
}

// New returns a provider.
func New(cfg Config) (*Provider, error) {
	var errs []error
	if cfg.AppID == "" {
		errs = append(errs, errors.New("github-app: no app id"))
	}
	if cfg.InstallationID <= 0 {
		errs = append(errs, errors.New("github-app: no installation id"))
	}
	if cfg.Key == nil {
		errs = append(errs, errors.New("github-app: no private key"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, errdefs.Invalidf("%w", err)
	}
	api := strings.TrimSuffix(cfg.APIURL, "/")
	if api == "" {
		api = DefaultAPIURL
	}
	client := http.Client{Timeout: 30 * time.Second}
	if cfg.HTTPClient != nil {
		client = *cfg.HTTPClient
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	aead, err := sealKey(cfg.Key)
	if err != nil {
		return nil, err
	}
	return &Provider{cfg: cfg, api: api, client: &client, aead: aead}, nil
}

// levels orders permission levels.
var levels = map[string]int{"read": 1, "write": 2, "admin": 3}

type tokenRequest struct {
	Repositories []string          `json:"repositories"`
	Permissions  map[string]string `json:"permissions"`
}

type tokenResponse struct {
	Token               string            `json:"token"`
	ExpiresAt           time.Time         `json:"expires_at"`
	Permissions         map[string]string `json:"permissions"`
	RepositorySelection string            `json:"repository_selection"`
	Repositories        []struct {
		Name string `json:"name"`
	} `json:"repositories"`
}

func parse(name string, sc map[string]any) (tokenRequest, error) {
	r := scope.New("credentials "+name+": scope", sc)
	req := tokenRequest{Repositories: r.Strings("repositories", true), Permissions: r.StringMap("permissions", true)}
	errs := []error{r.Err()}
	for _, repo := range req.Repositories {
		if strings.Contains(repo, "/") {
			errs = append(errs, errdefs.Invalidf("credentials %s: scope.repositories: %q: give the name without its owner (the installation decides the owner)", name, repo))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(req.Permissions)) {
		if levels[req.Permissions[k]] == 0 {
			errs = append(errs, errdefs.Invalidf("credentials %s: scope.permissions.%s: want read, write or admin, got %q", name, k, req.Permissions[k]))
		}
	}
	return req, errors.Join(errs...)
}

// Issue implements creds.Provider: POST /app/installations/ID/access_tokens with the
// app's JWT, narrowed to the scope's repositories and permissions.
func (p *Provider) Issue(ctx context.Context, args creds.IssueArgs) (creds.Grant, error) {
	c := args.Credential
	want, err := parse(c.Name, c.Scope)
	if err != nil {
		return creds.Grant{}, err
	}
	jwt, err := appJWT(p.cfg.AppID, p.cfg.Key, args.Now)
	if err != nil {
		return creds.Grant{}, err
	}
	body, _ := json.Marshal(want)
	url := p.api + "/app/installations/" + strconv.FormatInt(p.cfg.InstallationID, 10) + "/access_tokens"
	var got tokenResponse
	if err := p.do(ctx, http.MethodPost, url, jwt, body, http.StatusCreated, &got); err != nil {
		return creds.Grant{}, fmt.Errorf("creating an installation token: %w", err)
	}
	if got.Token == "" {
		return creds.Grant{}, errors.New("creating an installation token: GitHub returned no token")
	}
	if err := wider(want, got); err != nil {
		if rerr := p.revokeToken(context.WithoutCancel(ctx), got.Token); rerr != nil {
			err = errors.Join(err, fmt.Errorf("revoking it: %w", rerr))
		}
		return creds.Grant{}, err
	}
	return creds.Grant{
		Secret:    creds.NewSecret(got.Token),
		ExpiresAt: got.ExpiresAt,
		RevokeRef: seal(p.aead, got.Token, args.Run, c.Name),
	}, nil
}

// wider reports a token that grants more than was asked.
func wider(want tokenRequest, got tokenResponse) error {
	var errs []error
	if got.RepositorySelection != "selected" {
		errs = append(errs, fmt.Errorf("repository_selection is %q, not \"selected\"", got.RepositorySelection))
	}
	for _, r := range got.Repositories {
		if !slices.ContainsFunc(want.Repositories, func(w string) bool { return strings.EqualFold(w, r.Name) }) {
			errs = append(errs, fmt.Errorf("repository %q was not asked for", r.Name))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got.Permissions)) {
		if k == "metadata" && got.Permissions[k] == "read" {
			continue // every installation token can read metadata; GitHub always lists it
		}
		if levels[got.Permissions[k]] > levels[want.Permissions[k]] {
			errs = append(errs, fmt.Errorf("permission %s: %q, asked for %q", k, got.Permissions[k], want.Permissions[k]))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("GitHub granted a wider token than asked; revoked it: %w", err)
	}
	return nil
}

// Revoke implements creds.Provider: DELETE /installation/token, authenticated with
// the token itself, opened from the grant's revoke reference. A token GitHub no
// longer accepts (401: revoked or expired) counts as revoked.
func (p *Provider) Revoke(ctx context.Context, g creds.Grant) error {
	if g.RevokeRef == "" {
		return creds.ErrNoRevokeRef
	}
	tok, err := open(p.aead, g.RevokeRef, g.Run, g.Name)
	if err != nil {
		return err
	}
	return p.revokeToken(ctx, tok)
}

func (p *Provider) revokeToken(ctx context.Context, tok string) error {
	err := p.do(ctx, http.MethodDelete, p.api+"/installation/token", tok, nil, http.StatusNoContent, nil)
	var se *statusError
	if errors.As(err, &se) && se.code == http.StatusUnauthorized {
		return nil
	}
	if err != nil {
		return fmt.Errorf("revoking an installation token: %w", err)
	}
	return nil
}

// statusError is an unexpected HTTP status with GitHub's message.
type statusError struct {
	code int
	msg  string
}

func (e *statusError) Error() string {
	if e.msg == "" {
		return "GitHub answered " + strconv.Itoa(e.code)
	}
	return "GitHub answered " + strconv.Itoa(e.code) + ": " + e.msg
}

// do makes one API request with a bearer token and decodes the answer into out.
func (p *Provider) do(ctx context.Context, method, url, bearer string, body []byte, wantStatus int, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("Authorization", "Bearer "+bearer)
	req.Header.Set("X-GitHub-Api-Version", apiVersion)
	req.Header.Set("User-Agent", "cordon")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != wantStatus {
		var m struct {
			Message string `json:"message"`
		}
		json.Unmarshal(data, &m)
		return &statusError{code: resp.StatusCode, msg: cut(m.Message, 200)}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decoding GitHub's answer: %w", err)
	}
	return nil
}

func cut(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
