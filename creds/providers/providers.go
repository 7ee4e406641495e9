// Package providers builds the credential providers from cordon's host-side
// configuration: environment variables read by cordon itself, outside the sandbox.
// None of them ever reaches a sandbox (the sandbox's environment starts from nothing,
// and contracts cannot pass credential-like variables).
//
//	local       always (tokens under the ledger root)
//	exec        always (commands named by the contract)
//	github-app  CORDON_GITHUB_APP_ID, CORDON_GITHUB_APP_KEY_FILE (PEM, mode 0600 or
//	            stricter), CORDON_GITHUB_INSTALLATION_ID; CORDON_GITHUB_API_URL
//	            (default https://api.github.com)
//	vault       VAULT_ADDR, VAULT_TOKEN; VAULT_NAMESPACE, VAULT_CACERT
package providers

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/creds"
	"github.com/cordonhq/cordon/creds/command"
	"github.com/cordonhq/cordon/creds/github"
	"github.com/cordonhq/cordon/creds/local"
	"github.com/cordonhq/cordon/creds/vault"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/hostexec"
)

// Provider names, as contracts spell them.
const (
	Local     = "local"
	Exec      = "exec"
	GitHubApp = "github-app"
	Vault     = "vault"
)

// Environment variables read on the host.
const (
	EnvGitHubAppID          = "CORDON_GITHUB_APP_ID"
	EnvGitHubAppKeyFile     = "CORDON_GITHUB_APP_KEY_FILE"
	EnvGitHubInstallationID = "CORDON_GITHUB_INSTALLATION_ID"
	EnvGitHubAPIURL         = "CORDON_GITHUB_API_URL"
	EnvVaultAddr            = "VAULT_ADDR"
	EnvVaultToken           = "VAULT_TOKEN"
	EnvVaultNamespace       = "VAULT_NAMESPACE"
	EnvVaultCACert          = "VAULT_CACERT"
)

// Config says how to build the providers. Zero fields mean defaults.
type Config struct {
	// Root is the ledger's root (creds.Config.Root), where local tokens live; "" means
	// creds.DefaultRoot().
	Root string
	// Need names the providers that must be available (those the plan's credentials
	// use); one that is not configured is an error naming what is missing. Others are
	// built when configured and left out otherwise (gc builds whatever it can).
	Need []string
	// Getenv reads the host environment; nil means os.Getenv.
	Getenv func(string) string
	// Stderr receives exec commands' standard error; nil discards it.
	Stderr io.Writer
	// Policy says where exec commands' programs may not lie: hostexec.PolicyOf the
	// plan (see command.Config.Policy).
	Policy hostexec.Policy
}

// Needed returns the provider names a plan's credentials use, for Config.Need.
func Needed(cs []contract.Credential) []string {
	var out []string
	for _, c := range cs {
		if !slices.Contains(out, c.Provider) {
			out = append(out, c.Provider)
		}
	}
	return out
}

// FromEnv returns the providers this host can offer, keyed by provider name, for
// creds.Config.Providers. Its error wraps errdefs.ErrUnavailable when a needed
// provider is not configured, errdefs.ErrInvalid when its configuration is wrong.
func FromEnv(cfg Config) (map[string]creds.Provider, error) {
	if cfg.Root == "" {
		cfg.Root = creds.DefaultRoot()
	}
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	out := map[string]creds.Provider{}
	var errs []error
	need := func(name string, err error) {
		if err != nil && slices.Contains(cfg.Need, name) {
			errs = append(errs, fmt.Errorf("credentials provider %s: %w", name, err))
		}
	}
	for _, n := range cfg.Need {
		switch n {
		case Local, Exec, GitHubApp, Vault:
		default:
			errs = append(errs, errdefs.Invalidf("unknown credentials provider %q", n))
		}
	}
	if p, err := local.New(cfg.Root); err == nil {
		out[Local] = p
	} else {
		need(Local, errdefs.Unavailablef("%w", err))
	}
	out[Exec] = command.New(command.Config{Getenv: cfg.Getenv, Stderr: cfg.Stderr, Policy: cfg.Policy})
	if p, err := gitHubApp(cfg.Getenv); err == nil {
		out[GitHubApp] = p
	} else {
		need(GitHubApp, err)
	}
	if p, err := vaultFromEnv(cfg.Getenv); err == nil {
		out[Vault] = p
	} else {
		need(Vault, err)
	}
	return out, errors.Join(errs...)
}

func missing(getenv func(string) string, names ...string) error {
	var miss []string
	for _, n := range names {
		if getenv(n) == "" {
			miss = append(miss, n)
		}
	}
	if len(miss) > 0 {
		return errdefs.Unavailablef("not configured on this host: set %s", strings.Join(miss, ", "))
	}
	return nil
}

func gitHubApp(getenv func(string) string) (*github.Provider, error) {
	if err := missing(getenv, EnvGitHubAppID, EnvGitHubAppKeyFile, EnvGitHubInstallationID); err != nil {
		return nil, err
	}
	inst, err := strconv.ParseInt(getenv(EnvGitHubInstallationID), 10, 64)
	if err != nil || inst <= 0 {
		return nil, errdefs.Invalidf("%s: want a positive number", EnvGitHubInstallationID)
	}
	path := getenv(EnvGitHubAppKeyFile)
	data, err := readPrivate(path)
	if err != nil {
		return nil, errdefs.Invalidf("%s: %w", EnvGitHubAppKeyFile, err)
	}
	key, err := github.ParseKey(data)
	if err != nil {
		return nil, errdefs.Invalidf("%s: %w", path, err)
	}
	return github.New(github.Config{
		APIURL: getenv(EnvGitHubAPIURL), AppID: getenv(EnvGitHubAppID), InstallationID: inst, Key: key,
	})
}

// readPrivate reads a key file that only its owner may read.
func readPrivate(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s must be a regular file of mode 0600 or stricter (it is %v)", path, st.Mode())
	}
	return io.ReadAll(io.LimitReader(f, 64<<10))
}

func vaultFromEnv(getenv func(string) string) (*vault.Provider, error) {
	if err := missing(getenv, EnvVaultAddr, EnvVaultToken); err != nil {
		return nil, err
	}
	client := &http.Client{Timeout: 30 * time.Second}
	if ca := getenv(EnvVaultCACert); ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, errdefs.Invalidf("%s: %w", EnvVaultCACert, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errdefs.Invalidf("%s: no certificate in %s", EnvVaultCACert, ca)
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		client.Transport = tr
	}
	return vault.New(vault.Config{
		Addr: getenv(EnvVaultAddr), Token: creds.NewSecret(getenv(EnvVaultToken)),
		Namespace: getenv(EnvVaultNamespace), HTTPClient: client,
	})
}
