// Package vault is the vault credential provider: a child token of cordon's own Vault
// token (POST /v1/auth/token/create), with the contract's policies and ttl, not
// renewable, revoked by its accessor (POST /v1/auth/token/revoke-accessor).
//
// Scope (in the contract):
//
//	scope:
//	  policies: [ci-read-artifacts]   # required; "root" is refused
//	  role: ci                        # optional: create against auth/token/create/ROLE
//	  num_uses: 0                     # optional: uses before the token dies (0: unlimited)
//
// The token gets exactly the policies named: Vault's "default" policy is left out
// unless it is named. A token that comes back with other policies, a longer lease
// than the ttl, or no accessor is revoked at once and the run fails. The ledger keeps
// the accessor, which can revoke the token but not use it.
package vault

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cordonhq/cordon/creds"
	"github.com/cordonhq/cordon/creds/internal/scope"
	"github.com/cordonhq/cordon/internal/errdefs"
)

// Config configures the provider (host-side configuration; nothing of it enters the
// sandbox).
type Config struct {
	// Addr is Vault's address (VAULT_ADDR), e.g. https://vault.internal:8200. Required.
	Addr string
	// Token is cordon's own Vault token (VAULT_TOKEN), the parent of every token
	// minted; it needs create on auth/token/create (or create/ROLE) and update on
	// auth/token/revoke-accessor. Required.
	Token creds.Secret
	// Namespace is the Vault Enterprise namespace (VAULT_NAMESPACE); "" means none.
	Namespace string
	// HTTPClient makes the requests (set its TLS configuration for VAULT_CACERT); nil
	// means a client with a 30 s timeout. Redirects are never followed either way.
	HTTPClient *http.Client
}

// Provider mints Vault child tokens. It implements [creds.Provider] and is safe for
// concurrent use.
type Provider struct {
	cfg    Config
	addr   string
	client *http.Client
}

// New returns a provider.
func New(cfg Config) (*Provider, error) {
	u, err := url.Parse(cfg.Addr)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, errdefs.Invalidf("vault: address %q is not an http(s) URL", cfg.Addr)
	}
	if cfg.Token.IsZero() {
		return nil, errdefs.Invalidf("vault: no token")
	}
	client := http.Client{Timeout: 30 * time.Second}
	if cfg.HTTPClient != nil {
		client = *cfg.HTTPClient
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Provider{cfg: cfg, addr: strings.TrimSuffix(cfg.Addr, "/"), client: &client}, nil
}

type createRequest struct {
	Policies        []string          `json:"policies"`
	TTL             string            `json:"ttl"`
	ExplicitMaxTTL  string            `json:"explicit_max_ttl"`
	Renewable       bool              `json:"renewable"`
	NoDefaultPolicy bool              `json:"no_default_policy"`
	DisplayName     string            `json:"display_name"`
	Meta            map[string]string `json:"meta"`
	NumUses         int               `json:"num_uses,omitempty"`
	Type            string            `json:"type"`
}

type createResponse struct {
	Auth *struct {
		ClientToken   string   `json:"client_token"`
		Accessor      string   `json:"accessor"`
		Policies      []string `json:"policies"`
		TokenPolicies []string `json:"token_policies"`
		LeaseDuration int64    `json:"lease_duration"`
		Renewable     bool     `json:"renewable"`
	} `json:"auth"`
}

// Issue implements creds.Provider.
func (p *Provider) Issue(ctx context.Context, args creds.IssueArgs) (creds.Grant, error) {
	c := args.Credential
	r := scope.New("credentials "+c.Name+": scope", c.Scope)
	policies := r.Strings("policies", true)
	role := r.String("role", false)
	uses := r.Int("num_uses")
	if err := r.Err(); err != nil {
		return creds.Grant{}, err
	}
	if slices.Contains(policies, "root") {
		return creds.Grant{}, errdefs.Invalidf("credentials %s: scope.policies: a task-scoped credential never gets root", c.Name)
	}
	if role != "" && (strings.ContainsAny(role, "/?#%") || role == "." || role == "..") {
		return creds.Grant{}, errdefs.Invalidf("credentials %s: scope.role: %q is not a role name", c.Name, role)
	}
	ttl := strconv.FormatInt(int64(c.TTL/time.Second), 10) + "s"
	req := createRequest{
		Policies: policies, TTL: ttl, ExplicitMaxTTL: ttl, Renewable: false,
		NoDefaultPolicy: !slices.Contains(policies, "default"),
		DisplayName:     "cordon-" + c.Name,
		Meta:            map[string]string{"cordon_run": args.Run, "cordon_credential": c.Name},
		NumUses:         uses, Type: "service",
	}
	path := "/v1/auth/token/create"
	if role != "" {
		path += "/" + role
	}
	body, _ := json.Marshal(req)
	var got createResponse
	if err := p.do(ctx, path, body, &got); err != nil {
		return creds.Grant{}, fmt.Errorf("creating a token: %w", err)
	}
	a := got.Auth
	if a == nil || a.ClientToken == "" {
		return creds.Grant{}, errors.New("creating a token: Vault returned no token")
	}
	if err := check(req, a.TokenPolicies, a.Policies, a.LeaseDuration, c.TTL, a.Accessor); err != nil {
		if rerr := p.revokeCreated(context.WithoutCancel(ctx), a.Accessor, a.ClientToken); rerr != nil {
			err = errors.Join(err, fmt.Errorf("revoking it: %w", rerr))
		}
		return creds.Grant{}, err
	}
	return creds.Grant{
		Secret:    creds.NewSecret(a.ClientToken),
		ExpiresAt: args.Now.Add(time.Duration(a.LeaseDuration) * time.Second),
		RevokeRef: a.Accessor,
	}, nil
}

// check refuses a token that is wider or longer-lived than asked, or unrevocable.
func check(req createRequest, tokenPolicies, policies []string, lease int64, ttl time.Duration, accessor string) error {
	var errs []error
	if tokenPolicies == nil {
		tokenPolicies = policies
	}
	for _, pol := range tokenPolicies {
		if !slices.Contains(req.Policies, pol) {
			errs = append(errs, fmt.Errorf("policy %q was not asked for", pol))
		}
	}
	if lease <= 0 || time.Duration(lease)*time.Second > ttl {
		errs = append(errs, fmt.Errorf("lease of %ds, asked for at most %s", lease, req.TTL))
	}
	if accessor == "" {
		errs = append(errs, errors.New("no accessor: it could not be revoked later"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("the token Vault returned is other than asked; revoked it: %w", err)
	}
	return nil
}

// revokeCreated revokes a token just created: by accessor if there is one, else with
// the token itself.
func (p *Provider) revokeCreated(ctx context.Context, accessor, token string) error {
	if accessor != "" {
		return p.Revoke(ctx, creds.Grant{RevokeRef: accessor})
	}
	return p.doAs(ctx, creds.NewSecret(token), "/v1/auth/token/revoke-self", []byte("{}"), nil)
}

// Revoke implements creds.Provider: the token and its children are revoked by
// accessor. An accessor Vault no longer knows (revoked or expired) counts as revoked.
func (p *Provider) Revoke(ctx context.Context, g creds.Grant) error {
	if g.RevokeRef == "" {
		return creds.ErrNoRevokeRef
	}
	body, _ := json.Marshal(map[string]string{"accessor": g.RevokeRef})
	err := p.do(ctx, "/v1/auth/token/revoke-accessor", body, nil)
	var se *statusError
	if errors.As(err, &se) && se.code == http.StatusBadRequest && se.gone() {
		return nil
	}
	if err != nil {
		return fmt.Errorf("revoking a token: %w", err)
	}
	return nil
}

// statusError is an unexpected HTTP status with Vault's errors.
type statusError struct {
	code int
	msgs []string
}

func (e *statusError) Error() string {
	msg := "Vault answered " + strconv.Itoa(e.code)
	if len(e.msgs) > 0 {
		m := strings.Join(e.msgs, "; ")
		if len(m) > 200 {
			m = m[:200] + "…"
		}
		msg += ": " + m
	}
	return msg
}

// gone reports Vault's answer for an accessor it does not know.
func (e *statusError) gone() bool {
	return slices.ContainsFunc(e.msgs, func(m string) bool {
		return strings.Contains(m, "invalid accessor") || strings.Contains(m, "token not found")
	})
}

func (p *Provider) do(ctx context.Context, path string, body []byte, out any) error {
	return p.doAs(ctx, p.cfg.Token, path, body, out)
}

// doAs POSTs body to path with token and decodes a 200 answer into out (a 204 is
// success without a body).
func (p *Provider) doAs(ctx context.Context, token creds.Secret, path string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.addr+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("X-Vault-Token", token.Reveal())
	req.Header.Set("X-Vault-Request", "true")
	req.Header.Set("Content-Type", "application/json")
	if p.cfg.Namespace != "" {
		req.Header.Set("X-Vault-Namespace", p.cfg.Namespace)
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
	switch {
	case resp.StatusCode == http.StatusNoContent && out == nil:
		return nil
	case resp.StatusCode != http.StatusOK:
		var e struct {
			Errors []string `json:"errors"`
		}
		json.Unmarshal(data, &e)
		return &statusError{code: resp.StatusCode, msgs: e.Errors}
	case out == nil:
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decoding Vault's answer: %w", err)
	}
	return nil
}
