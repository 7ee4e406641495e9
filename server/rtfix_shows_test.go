package server

import (
	"strings"
	"testing"

	"github.com/cordonhq/cordon/server/api"
)

// TestRTFixShowsOfOtherTenantsDoNotStarveOne: a tenant's show of its own run is not
// refused because other tenants' shows are in flight. Two tenants' shows at their
// per-tenant bound (maxLogDocsPerTenant = 2 each) fill the daemon's (maxLogDocs = 4),
// so every other tenant's show is 429 server_log_documents. A show stays in flight
// as long as its client does not read it, up to the write timeout (60s), so two
// tenants, each holding two unread shows of a log of a few MiB, deny every show to
// every other tenant, for as long as they repeat it.
func TestRTFixShowsOfOtherTenantsDoNotStarveOne(t *testing.T) {
	f := newTenants(t)
	const id = "20261129T201530Z-3fa9c1"
	logRun(t, f.beta.AuditRoot(), id, false)
	if code, body := f.do(t, "GET", "/v1/runs/"+id, "beta/lead", ""); code != 200 {
		t.Fatalf("show with no other in flight: %d %s", code, body)
	}
	// The shows of two other tenants, in flight (unread by their clients).
	for _, other := range []string{"acme", "gamma"} {
		for range maxLogDocsPerTenant {
			release, q := f.s.logDocs.acquire(other, api.RoleAuditor)
			if release == nil {
				t.Fatalf("%s's show refused: %s", other, q)
			}
			defer release()
		}
	}
	if code, body := f.do(t, "GET", "/v1/runs/"+id, "beta/lead", ""); code != 200 {
		t.Errorf("beta's first show while acme and gamma each have %d in flight: %d %s; want 200 (another tenant's shows must not deny it)",
			maxLogDocsPerTenant, code, strings.TrimSpace(body))
	}
}
