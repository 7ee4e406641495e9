package server

import (
	"slices"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/runner/kubernetes"
	"github.com/cordonhq/cordon/server/config"
)

// TestTenantPlacement: a tenant placed on a cluster runs every session there (a
// client asking for a local backend is refused), no other tenant can ask for a
// cluster, and the supervisor's environment names a placement only for a placed
// tenant, never the server's own.
func TestTenantPlacement(t *testing.T) {
	t.Setenv(kubernetes.EnvConfig, "/etc/servers-own.yaml")
	t.Setenv(kubernetes.EnvTenant, "someone")
	placed := tenantRoots{t: config.Tenant{Name: "acme", Placement: config.Placement{Kubernetes: &config.KubernetesPlacement{Config: "/etc/p.yaml"}}}}
	local := tenantRoots{t: config.Tenant{Name: "beta"}}
	for _, tc := range []struct {
		r         tenantRoots
		requested string
		want      string // "" with wantErr
		wantErr   string
	}{
		{placed, "", "kubernetes", ""},
		{placed, "auto", "kubernetes", ""},
		{placed, "kubernetes", "kubernetes", ""},
		{placed, "bwrap", "", "placed on kubernetes"},
		{placed, "docker", "", "placed on kubernetes"},
		{local, "kubernetes", "", "not placed on a cluster"},
		{local, "", "", ""},
		{local, "bwrap", "bwrap", ""},
	} {
		got, err := tc.r.backend(tc.requested)
		if got != tc.want || (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("tenant %s asking %q: got %q, %v; want %q, %q", tc.r.t.Name, tc.requested, got, err, tc.want, tc.wantErr)
		}
	}
	env := placed.env()
	if !slices.Contains(env, kubernetes.EnvConfig+"=/etc/p.yaml") || !slices.Contains(env, kubernetes.EnvTenant+"=acme") ||
		slices.Contains(env, kubernetes.EnvConfig+"=/etc/servers-own.yaml") || slices.Contains(env, kubernetes.EnvTenant+"=someone") {
		t.Errorf("a placed tenant's supervisor environment: %q", env)
	}
	for _, kv := range local.env() {
		if strings.HasPrefix(kv, kubernetes.EnvConfig+"=") || strings.HasPrefix(kv, kubernetes.EnvTenant+"=") {
			t.Errorf("an unplaced tenant's supervisor inherits %s", kv)
		}
	}
}
