package providers_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/creds/providers"
	"github.com/cordonhq/cordon/internal/errdefs"
)

func getenv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func keyFile(t *testing.T, mode os.FileMode) string {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "app.pem")
	data := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
	if err := os.WriteFile(p, data, mode); err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, mode)
	return p
}

func TestNothingConfigured(t *testing.T) {
	root := t.TempDir()
	ps, err := providers.FromEnv(providers.Config{Root: root, Getenv: getenv(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if ps[providers.Local] == nil || ps[providers.Exec] == nil || ps[providers.GitHubApp] != nil || ps[providers.Vault] != nil {
		t.Errorf("providers %v; want local and exec only", ps)
	}
	// Needed but missing: the error names every variable to set.
	_, err = providers.FromEnv(providers.Config{Root: root, Getenv: getenv(nil), Need: []string{"github-app", "vault", "local"}})
	if !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("err %v; want ErrUnavailable", err)
	}
	for _, v := range []string{"CORDON_GITHUB_APP_ID", "CORDON_GITHUB_APP_KEY_FILE", "CORDON_GITHUB_INSTALLATION_ID", "VAULT_ADDR", "VAULT_TOKEN"} {
		if !strings.Contains(err.Error(), v) {
			t.Errorf("error does not name %s: %v", v, err)
		}
	}
	if _, err := providers.FromEnv(providers.Config{Root: root, Getenv: getenv(nil), Need: []string{"aws"}}); !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("unknown provider: %v", err)
	}
}

func TestAllConfigured(t *testing.T) {
	env := map[string]string{
		"CORDON_GITHUB_APP_ID": "12345", "CORDON_GITHUB_APP_KEY_FILE": keyFile(t, 0o600), "CORDON_GITHUB_INSTALLATION_ID": "42",
		"VAULT_ADDR": "https://vault.internal:8200", "VAULT_TOKEN": "hvs.parent",
	}
	ps, err := providers.FromEnv(providers.Config{Root: t.TempDir(), Getenv: getenv(env), Need: []string{"local", "exec", "github-app", "vault"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 4 {
		t.Errorf("providers %v", ps)
	}
}

func TestMisconfigured(t *testing.T) {
	for name, tc := range map[string]struct {
		env  map[string]string
		need string
		msg  string
	}{
		"key readable by others":    {map[string]string{"CORDON_GITHUB_APP_ID": "1", "CORDON_GITHUB_APP_KEY_FILE": keyFile(t, 0o644), "CORDON_GITHUB_INSTALLATION_ID": "42"}, "github-app", "0600"},
		"key missing":               {map[string]string{"CORDON_GITHUB_APP_ID": "1", "CORDON_GITHUB_APP_KEY_FILE": "/nonexistent/key.pem", "CORDON_GITHUB_INSTALLATION_ID": "42"}, "github-app", "no such file"},
		"installation not a number": {map[string]string{"CORDON_GITHUB_APP_ID": "1", "CORDON_GITHUB_APP_KEY_FILE": keyFile(t, 0o600), "CORDON_GITHUB_INSTALLATION_ID": "acme"}, "github-app", "CORDON_GITHUB_INSTALLATION_ID"},
		"vault address":             {map[string]string{"VAULT_ADDR": "vault:8200", "VAULT_TOKEN": "x"}, "vault", "not an http(s) URL"},
		"vault CA missing":          {map[string]string{"VAULT_ADDR": "https://v:8200", "VAULT_TOKEN": "x", "VAULT_CACERT": "/nonexistent/ca.pem"}, "vault", "VAULT_CACERT"},
	} {
		t.Run(name, func(t *testing.T) {
			ps, err := providers.FromEnv(providers.Config{Root: t.TempDir(), Getenv: getenv(tc.env), Need: []string{tc.need}})
			if !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("err %v; want ErrInvalid mentioning %q", err, tc.msg)
			}
			if ps[tc.need] != nil {
				t.Error("the misconfigured provider was built")
			}
			// Not needed (gc): left out without an error.
			if _, err := providers.FromEnv(providers.Config{Root: t.TempDir(), Getenv: getenv(tc.env)}); err != nil {
				t.Errorf("not needed: %v", err)
			}
		})
	}
}

func TestNeeded(t *testing.T) {
	got := providers.Needed([]contract.Credential{{Provider: "vault"}, {Provider: "local"}, {Provider: "vault"}})
	if strings.Join(got, ",") != "vault,local" {
		t.Errorf("Needed = %q", got)
	}
}
