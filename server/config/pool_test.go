package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// withPools is the good config with acme's pools set to yml (indented as a tenant's
// keys) and the tenants' roots under top.
func withPools(top, yml string) string {
	c := strings.Replace(good, "    root: /srv/cordon/acme\n", "    root: "+filepath.Join(top, "acme")+"\n"+yml, 1)
	return strings.Replace(c, "/srv/cordon/beta", filepath.Join(top, "beta"), 1)
}

// TestPoolsParsed: a tenant's pools decode with their names, sizes, backends, stage and
// contract; one without a contract runs the base and is the one a bare start claims.
func TestPoolsParsed(t *testing.T) {
	c, err := Parse("serve.yaml", []byte(withPools("/srv", `    pools:
      - {name: default, size: 2, backend: bwrap}
      - {name: py, size: 1, contract: /etc/cordon/py.yaml, stage: true}
`)))
	if err != nil {
		t.Fatal(err)
	}
	ps := c.Tenants[0].Pools
	if len(ps) != 2 || ps[0].Name != "default" || ps[0].Size != 2 || ps[0].Backend != "bwrap" || !ps[0].Base() ||
		ps[1].Name != "py" || ps[1].Contract != "/etc/cordon/py.yaml" || !ps[1].Stage || ps[1].Base() {
		t.Errorf("pools: %+v", ps)
	}
	if len(c.Tenants[1].Pools) != 0 {
		t.Errorf("beta has pools: %+v", c.Tenants[1].Pools)
	}
}

// TestPoolsRefused: every problem of a pool is a config error at its place.
func TestPoolsRefused(t *testing.T) {
	for _, tc := range []struct{ yml, want string }{
		{"    pool: {size: 1}\n", "serve.yaml:8:11: pool: a tenant's warm pools are a list of named pools now"},
		{"    pools: [{size: 1}]\n", `serve.yaml:8:13: pool: missing "name"`},
		{"    pools: [{name: a}]\n", `serve.yaml:8:13: pool: missing "size"`},
		{"    pools: [{name: a, size: 0}]\n", "pool size: 0 is out of range [1, 64]"},
		{"    pools: [{name: A, size: 1}]\n", `pool name: "A": want lowercase letters`},
		{"    pools: [{name: a, size: 1, backend: lxc}]\n", `pool backend: "lxc" is not one of`},
		{"    pools: [{name: a, size: 1, stage: yes}]\n", "pool stage: want true or false"},
		{"    pools: [{name: a, size: 1, contract: py.yaml}]\n", `pool contract: "py.yaml" is not an absolute path`},
		{"    pools: [{name: a, size: 1, image: x}]\n", `unknown key "image"`},
		{"    pools: [{name: a, size: 1}, {name: a, size: 1}]\n", `serve.yaml:8:33: tenant "acme": pool "a": the name is already used at line 8`},
		{"    pools: [{name: a, size: 40}, {name: b, size: 40}]\n", `tenant "acme": its pools hold 80 warm sessions; at most 64`},
		{"    pools: [{name: a, size: 5}]\n    quotas: {sessions: 4}\n", `tenant "acme": its pools hold 5 warm sessions, more than its sessions quota (4)`},
	} {
		_, err := Parse("serve.yaml", []byte(withPools("/srv", tc.yml)))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v; want %q", tc.yml, err, tc.want)
		}
	}
}

// TestPoolContractLoaded: Load reads a pool's contract as it reads a base (trusted,
// never from a tenant's root) and admits it against the tenant's base: a pool wider
// than the base fails the load at its contract key, its own problems at FILE:LINE:COL
// in the pool's file; a pool without a contract gets the base's.
func TestPoolContractLoaded(t *testing.T) {
	dir := t.TempDir()
	py := filepath.Join(dir, "py.yaml")
	write := func(path, data string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(dir, "serve.yaml")
	write(cfg, withPools(dir, "    pools:\n      - {name: default, size: 1}\n      - {name: py, size: 1, contract: "+py+"}\n"))

	write(py, "version: 1\nlimits: {memory: 256MiB}\n")
	c, err := Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ps := c.Tenants[0].Pools
	if string(ps[1].YAML) != "version: 1\nlimits: {memory: 256MiB}\n" || ps[1].Limits.Memory != 256<<20 {
		t.Errorf("py: %q, limits %+v", ps[1].YAML, ps[1].Limits)
	}
	if len(ps[0].YAML) == 0 || string(ps[0].YAML) != string(c.Tenants[0].Base.YAML()) {
		t.Errorf("default's contract is not the base's: %q", ps[0].YAML)
	}

	write(py, "version: 1\nnetwork: {allow: [{host: evil.example, ports: [443]}]}\n")
	_, err = Load(cfg)
	for _, want := range []string{`serve.yaml:10:39: tenant "acme": pool "py": contract ` + py + " is not admitted by the tenant's base:",
		"evil.example"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("wider than the base: got %v; want %q", err, want)
		}
	}

	write(py, "version: 1\nmonitor: {mode: sometimes}\n")
	if _, err := Load(cfg); err == nil || !strings.Contains(err.Error(), py+":2:17: monitor.mode") {
		t.Errorf("not compiling: got %v; want the problem at %s:2:17", err, py)
	}

	os.Chmod(py, 0o666)
	if _, err := Load(cfg); err == nil || !strings.Contains(err.Error(), "pool contract "+py+" is not safe to read") {
		t.Errorf("writable by others: %v", err)
	}

	inRoot := filepath.Join(dir, "acme", "workspaces", "w", "py.yaml")
	os.MkdirAll(filepath.Dir(inRoot), 0o700)
	write(inRoot, "version: 1\n")
	write(cfg, withPools(dir, "    pools: [{name: py, size: 1, contract: "+inRoot+"}]\n"))
	if _, err := Load(cfg); err == nil || !strings.Contains(err.Error(), `is inside tenant "acme"'s root`) {
		t.Errorf("in a tenant's root: %v", err)
	}
}
