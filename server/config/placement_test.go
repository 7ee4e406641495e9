package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// placementConfig is a kubernetes placement config that checks.
const placementConfig = "version: 1\nnamespace: acme\ninitImage: cordon/init:1\n"

// TestLoadPlacement: a tenant's placement: kubernetes names a placement config Load
// reads (as it reads the config: a trusted file, not in a tenant's root) and checks,
// and a kubeconfig held to the same rule; every session of the tenant is then on
// kubernetes, its pools too, and no other tenant's pool may ask for kubernetes.
func TestLoadPlacement(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string, mode os.FileMode) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		return p
	}
	pc := write("placement.yaml", placementConfig, 0o644)
	kc := write("kubeconfig", "apiVersion: v1\nkind: Config\n", 0o600)
	load := func(tenant string) (*Config, error) {
		t.Helper()
		return Load(write("serve.yaml", "version: 1\nlisten: {unix: {path: /run/cordon-test.sock}}\ntenants:\n"+tenant, 0o600))
	}
	c, err := load("  - name: acme\n    root: " + filepath.Join(dir, "acme") + "\n    placement:\n      kubernetes: {config: " + pc + ", kubeconfig: " + kc + "}\n    pools: [{name: p, size: 1}]\n")
	if err != nil {
		t.Fatal(err)
	}
	k := c.Tenants[0].Placement.Kubernetes
	if k == nil || k.Config != pc || k.Kubeconfig != kc || k.Pod.Namespace != "acme" || c.Tenants[0].Placement.Backend() != BackendKubernetes {
		t.Errorf("placement: %+v, want the files and the decoded config", k)
	}
	if (Placement{}).Backend() != "" {
		t.Error("an unplaced tenant has a backend")
	}

	// Two tenants in one namespace would share each other's Pods, policies and gc.
	_, err = load("  - name: acme\n    root: " + filepath.Join(dir, "acme") + "\n    placement: {kubernetes: {config: " + pc + "}}\n" +
		"  - name: zeta\n    root: " + filepath.Join(dir, "zeta") + "\n    placement: {kubernetes: {config: " + pc + "}}\n")
	if err == nil || !strings.Contains(err.Error(), `tenant "zeta": placement kubernetes: namespace "acme" is tenant "acme"'s too`) {
		t.Errorf("two tenants in one namespace: got %v", err)
	}

	bad := write("bad.yaml", "version: 1\nnamespace: acme\n", 0o644)
	open := write("open.yaml", placementConfig, 0o666)
	for name, tc := range map[string]struct{ tenant, want string }{
		"no config":          {"    placement: {kubernetes: {kubeconfig: " + kc + "}}\n", `missing "config"`},
		"relative config":    {"    placement: {kubernetes: {config: placement.yaml}}\n", "not an absolute path"},
		"unknown key":        {"    placement: {kubernetes: {config: " + pc + ", context: x}}\n", "context"},
		"unknown placement":  {"    placement: {nomad: {}}\n", "nomad"},
		"config fails check": {"    placement: {kubernetes: {config: " + bad + "}}\n", "initImage"},
		"config writable":    {"    placement: {kubernetes: {config: " + open + "}}\n", "writable by group or others"},
		"missing kubeconfig": {"    placement: {kubernetes: {config: " + pc + ", kubeconfig: " + filepath.Join(dir, "none") + "}}\n", "kubeconfig"},
		"local pool": {"    placement: {kubernetes: {config: " + pc + "}}\n    pools: [{name: p, size: 1, backend: bwrap}]\n",
			`backend "bwrap", but the tenant's sessions are placed on kubernetes`},
		"kubernetes pool unplaced": {"    pools: [{name: p, size: 1, backend: kubernetes}]\n", "needs the tenant's placement"},
	} {
		_, err := load("  - name: acme\n    root: " + filepath.Join(dir, "acme") + "\n" + tc.tenant)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error with %q", name, err, tc.want)
		}
	}
}
