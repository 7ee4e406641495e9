package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/server/admit"
)

// withBase is the good config with base_contract set for tenant acme (line 8) and a
// tenant root under top.
func withBase(top, base string) string {
	c := strings.Replace(good, "    root: /srv/cordon/acme\n", "    root: "+filepath.Join(top, "acme")+"\n    base_contract: "+base+"\n", 1)
	return strings.Replace(c, "/srv/cordon/beta", filepath.Join(top, "beta"), 1)
}

// writeConfig writes a base contract and a config naming it, both 0600, in a fresh
// directory; it returns the config's path and the base's.
func writeConfig(t *testing.T, baseYAML string) (cfg, base string) {
	t.Helper()
	dir := t.TempDir()
	base = filepath.Join(dir, "acme-base.yaml")
	cfg = filepath.Join(dir, "serve.yaml")
	if err := os.WriteFile(base, []byte(baseYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte(withBase(dir, base)), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg, base
}

// TestBaseContractLoaded: Load reads and compiles a tenant's base_contract once, and
// gives a tenant without one the built-in default; what Check then admits follows it.
func TestBaseContractLoaded(t *testing.T) {
	cfg, _ := writeConfig(t, "version: 1\nnetwork: {allow: [{host: github.com, ports: [443]}]}\n")
	c, err := Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	acme, beta := c.Tenants[0], c.Tenants[1]
	if acme.Base == nil || beta.Base == nil || beta.BaseContract != "" {
		t.Fatalf("bases: acme %v, beta %v", acme.Base, beta.Base)
	}
	ws := filepath.Join(acme.Workspaces(), "w")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	github := []byte("version: 1\nnetwork: {allow: [{host: github.com, ports: [443]}]}\n")
	if _, err := admit.Check(acme.Base, github, ws, acme.Workspaces()); err != nil {
		t.Errorf("acme's base allows github.com: %v", err)
	}
	if _, err := admit.Check(beta.Base, github, ws, acme.Workspaces()); !errors.Is(err, admit.ErrRefused) {
		t.Errorf("beta's (the default) does not: %v", err)
	}
}

// TestBaseContractRefused: a base_contract that is relative, missing, unsafe to trust,
// in a tenant's root or that does not compile is a config error at its key, and the
// base's own problems follow at FILE:LINE:COL in it.
func TestBaseContractRefused(t *testing.T) {
	if _, err := Parse("serve.yaml", []byte(withBase("/srv", "acme.yaml"))); err == nil ||
		!strings.Contains(err.Error(), `serve.yaml:8:20: base_contract: "acme.yaml" is not an absolute path`) {
		t.Errorf("relative: %v", err)
	}
	cfg, base := writeConfig(t, "version: 1\nmonitor: {mode: sometimes}\n")
	_, err := Load(cfg)
	for _, want := range []string{cfg + `:8:20: tenant "acme": base_contract ` + base + " does not compile:",
		base + ":2:17: monitor.mode: want off, best-effort or required"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("not compiling: got %v; want %q", err, want)
		}
	}
	var ce *Error
	if !errors.As(err, &ce) {
		t.Errorf("not a config error: %v", err)
	}

	cfg, base = writeConfig(t, "version: 1\n")
	os.Chmod(base, 0o666)
	if _, err := Load(cfg); err == nil || !strings.Contains(err.Error(), `:8:20: tenant "acme": base_contract `+base+" is not safe to read") {
		t.Errorf("writable by others: %v", err)
	}
	os.Remove(base)
	if _, err := Load(cfg); err == nil || !strings.Contains(err.Error(), `:8:20: tenant "acme": invalid: reading base_contract`) {
		t.Errorf("missing: %v", err)
	}

	dir := t.TempDir()
	inRoot := filepath.Join(dir, "beta", "workspaces", "w", "base.yaml")
	os.MkdirAll(filepath.Dir(inRoot), 0o700)
	os.WriteFile(inRoot, []byte("version: 1\n"), 0o600)
	cfg = filepath.Join(dir, "serve.yaml")
	os.WriteFile(cfg, []byte(withBase(dir, inRoot)), 0o600)
	if _, err := Load(cfg); err == nil || !strings.Contains(err.Error(), `is inside tenant "beta"'s root`) {
		t.Errorf("in a tenant's root: %v", err)
	}
}

// TestParseLeavesNoBase: Parse alone reads no file, so a tenant has no base, and a
// contract checked against none is refused rather than held to a default.
func TestParseLeavesNoBase(t *testing.T) {
	c, err := Parse("serve.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(t.TempDir(), "w")
	os.Mkdir(ws, 0o700)
	if _, err := admit.Check(c.Tenants[0].Base, []byte("version: 1\n"), ws, filepath.Dir(ws)); err == nil {
		t.Error("admitted against no base")
	}
}
