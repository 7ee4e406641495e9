package server

import (
	"fmt"
	"net/http"
	"sync"

	"github.com/cordonhq/cordon/server/api"
	"github.com/cordonhq/cordon/server/auth"
)

// Bounds of the requests that hold their connection long (api.Route.Held: an exec's
// stream, an export or a follow, a start, a stop). Such a request is serving, so the
// listener never closes it to admit another: without a bound, one tenant's streams
// would take every connection slot and lock every other tenant out. Each tenant may
// hold maxHeldPerTenant of them, and all tenants together half of a listener's
// maxConns, so the other half always serves short requests.
const (
	maxHeldPerTenant = 32
	maxHeld          = maxConns / 2

	heldQuota       = "held_requests"        // api.Error.Quota past maxHeldPerTenant
	serverHeldQuota = "server_held_requests" // past maxHeld
)

// heldLimiter counts the held requests per tenant.
type heldLimiter struct {
	mu    sync.Mutex // guards per and total
	per   map[string]int
	total int
}

func newHeldLimiter() *heldLimiter { return &heldLimiter{per: map[string]int{}} }

// acquire takes one of tenant's slots; the quota it is past when it cannot.
func (l *heldLimiter) acquire(tenant string) (release func(), quota string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.per[tenant] >= maxHeldPerTenant:
		return nil, heldQuota
	case l.total >= maxHeld:
		return nil, serverHeldQuota
	}
	l.per[tenant]++
	l.total++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.per[tenant]--; l.per[tenant] == 0 {
				delete(l.per, tenant)
			}
			l.total--
		})
	}, ""
}

// held wraps the handler of a held route: past a bound it answers 429 with the
// quota named, at once; no request waits in a queue for a slot.
func (s *Server) held(h handler) handler {
	return func(w http.ResponseWriter, r *http.Request, id auth.Identity) {
		release, quota := s.heldReqs.acquire(id.Tenant)
		if release == nil {
			limit := maxHeldPerTenant
			if quota == serverHeldQuota {
				limit = maxHeld
			}
			s.metrics.refused(id.Tenant, quota)
			w.Header().Set("Retry-After", "1")
			writeJSON(w, http.StatusTooManyRequests, api.Error{Quota: quota,
				Error: fmt.Sprintf("%s: at most %d long requests (exec, export, follow, start, stop) at a time", quota, limit)})
			return
		}
		defer release()
		h(w, r, id)
	}
}
