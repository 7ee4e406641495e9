package command_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/creds"
	"github.com/cordonhq/cordon/creds/command"
)

var t0 = time.Date(2030, 1, 2, 15, 4, 5, 0, time.UTC)

const run = "20300102T150405Z-abcdef"

// script writes an executable shell script and returns its path.
func script(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// host is the host environment the provider sees: the developer's own token is in
// it, and must not reach the commands.
func host(out string) func(string) string {
	vars := map[string]string{
		"PATH": os.Getenv("PATH"), "OUT": out, "HOME": "/home/dev",
		"GITHUB_TOKEN": "ghp_developers_own_token", "AWS_SECRET_ACCESS_KEY": "developers-aws-key",
	}
	return func(k string) string { return vars[k] }
}

func args(name string, ttl time.Duration, sc map[string]any) creds.IssueArgs {
	return creds.IssueArgs{Run: run, Now: t0, Credential: contract.Credential{Name: name, Provider: "exec", TTL: ttl, Scope: sc}}
}

func envFile(t *testing.T, p string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		m[k] = v
	}
	return m
}

func TestMintAndRevoke(t *testing.T) {
	dir := t.TempDir()
	mint := script(t, dir, "mint", `env > "$OUT/mint.env"
printf '{"token":"minted-%s-value","id":"id-%s","expires_at":"2030-01-02T15:14:05Z"}\n' "$CORDON_CRED_NAME" "$CORDON_CRED_NAME"
`)
	revoke := script(t, dir, "revoke", `env > "$OUT/revoke.env"`)
	p := command.New(command.Config{Getenv: host(dir)})
	sc := map[string]any{"mint": []any{mint, "--role", "ci"}, "revoke": []any{revoke}, "env": []any{"OUT"}, "params": map[string]any{"role": "ci"}}
	g, err := p.Issue(context.Background(), args("CI_TOKEN", time.Hour, sc))
	if err != nil {
		t.Fatal(err)
	}
	if g.Secret.Reveal() != "minted-CI_TOKEN-value" || g.ID != "id-CI_TOKEN" || g.RevokeRef != "id-CI_TOKEN" {
		t.Errorf("grant %+v (value %q)", g, g.Secret.Reveal())
	}
	// The command said 10 minutes, though an hour was asked for: its word is recorded.
	if !g.ExpiresAt.Equal(t0.Add(10 * time.Minute)) {
		t.Errorf("expires %v", g.ExpiresAt)
	}
	env := envFile(t, filepath.Join(dir, "mint.env"))
	for k, want := range map[string]string{
		"CORDON_RUN_ID": run, "CORDON_CRED_NAME": "CI_TOKEN", "CORDON_CRED_TTL": "3600", "OUT": dir, "PATH": os.Getenv("PATH"),
	} {
		if env[k] != want {
			t.Errorf("mint got %s=%q; want %q", k, env[k], want)
		}
	}
	if !strings.Contains(env["CORDON_CRED_SCOPE"], `"params":{"role":"ci"}`) {
		t.Errorf("CORDON_CRED_SCOPE=%s", env["CORDON_CRED_SCOPE"])
	}
	for _, k := range []string{"HOME", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "CORDON_CRED_ID"} {
		if _, ok := env[k]; ok {
			t.Errorf("mint got %s, which the contract did not name", k)
		}
	}

	g.Run, g.Name, g.Scope, g.IssuedAt = run, "CI_TOKEN", sc, t0
	g.Secret = creds.Secret{} // as the broker passes it
	if err := p.Revoke(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	env = envFile(t, filepath.Join(dir, "revoke.env"))
	if env["CORDON_CRED_ID"] != "id-CI_TOKEN" || env["CORDON_CRED_EXPIRES_AT"] != "2030-01-02T15:14:05Z" || env["CORDON_CRED_NAME"] != "CI_TOKEN" {
		t.Errorf("revoke env %v", env)
	}
	if _, ok := env["GITHUB_TOKEN"]; ok {
		t.Error("revoke got the developer's token")
	}
}

func TestMintFailures(t *testing.T) {
	dir := t.TempDir()
	revoke := script(t, dir, "revoke", `touch "$OUT/revoked.$CORDON_CRED_ID"`)
	for _, tc := range []struct {
		name, body, msg string
		revoked         bool // what was minted is revoked
	}{
		{name: "exit status", body: "echo oops >&2; exit 3", msg: "exit status 3"},
		{name: "not JSON", body: `echo 'token=leaky-value-1234'`, msg: "not one JSON object"},
		{name: "unknown field", body: `echo '{"token":"leaky-value-1234","id":"x","expires_at":"2030-01-02T15:14:05Z","extra":1}'`, msg: "not one JSON object"},
		{name: "no id", body: `echo '{"token":"leaky-value-1234","expires_at":"2030-01-02T15:14:05Z"}'`, msg: "no id"},
		{name: "bad expiry", body: `echo '{"token":"leaky-value-1234","id":"bad-exp","expires_at":"tomorrow"}'`, msg: "RFC 3339", revoked: true},
		{name: "empty token", body: `echo '{"token":"","id":"empty","expires_at":"2030-01-02T15:14:05Z"}'`, msg: "empty token", revoked: true},
		{name: "too much output", body: `head -c 100000 /dev/zero | tr '\0' 'a'`, msg: "more than"},
		{name: "timeout", body: `sleep 10`, msg: "deadline exceeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mint := script(t, dir, "mint-"+strings.ReplaceAll(tc.name, " ", "-"), tc.body)
			p := command.New(command.Config{Getenv: host(dir), Timeout: 500 * time.Millisecond})
			_, err := p.Issue(context.Background(), args("T", time.Hour, map[string]any{"mint": []any{mint}, "revoke": []any{revoke}, "env": []any{"OUT"}}))
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err %v; want %q", err, tc.msg)
			}
			if strings.Contains(err.Error(), "leaky-value") {
				t.Errorf("the error quotes the output: %v", err)
			}
			matches, _ := filepath.Glob(filepath.Join(dir, "revoked.*"))
			if tc.revoked != (len(matches) > 0) {
				t.Errorf("revoked: %v; want %v", matches, tc.revoked)
			}
			for _, m := range matches {
				os.Remove(m)
			}
		})
	}
}

func TestScopeRefusals(t *testing.T) {
	p := command.New(command.Config{})
	for name, sc := range map[string]map[string]any{
		"no mint":          {"revoke": []any{"true"}},
		"no revoke":        {"mint": []any{"true"}},
		"relative command": {"mint": []any{"./scripts/mint.sh"}, "revoke": []any{"true"}},
		"relative revoke":  {"mint": []any{"true"}, "revoke": []any{"bin/revoke"}},
		"env PATH":         {"mint": []any{"true"}, "revoke": []any{"true"}, "env": []any{"PATH"}},
		"env CORDON_":      {"mint": []any{"true"}, "revoke": []any{"true"}, "env": []any{"CORDON_RUN_ID"}},
		"unknown key":      {"mint": []any{"true"}, "revoke": []any{"true"}, "cmd": "x"},
	} {
		if _, err := p.Issue(context.Background(), args("T", time.Hour, sc)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestRevokeFailures(t *testing.T) {
	dir := t.TempDir()
	p := command.New(command.Config{Getenv: host(dir)})
	fail := script(t, dir, "fail", "exit 1")
	g := creds.Grant{Run: run, Name: "T", RevokeRef: "id", Scope: map[string]any{"mint": []any{"true"}, "revoke": []any{fail}}}
	if err := p.Revoke(context.Background(), g); err == nil || !strings.Contains(err.Error(), "revoke command") {
		t.Errorf("failing revoke: %v", err)
	}
	g.RevokeRef = ""
	if err := p.Revoke(context.Background(), g); !errors.Is(err, creds.ErrNoRevokeRef) {
		t.Errorf("no reference: %v", err)
	}
	// A name is looked up in the host's PATH.
	g = creds.Grant{Run: run, Name: "T", RevokeRef: "id", Scope: map[string]any{"mint": []any{"true"}, "revoke": []any{"true"}}}
	if err := p.Revoke(context.Background(), g); err != nil {
		t.Errorf("revoke: [true]: %v", err)
	}
	g.Scope = map[string]any{"mint": []any{"true"}, "revoke": []any{"no-such-command-cordon"}}
	if err := p.Revoke(context.Background(), g); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("missing command: %v", err)
	}
}
