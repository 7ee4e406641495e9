package server

import (
	"fmt"
	"net/http"
	"sync"

	"github.com/cordonhq/cordon/server/api"
	"github.com/cordonhq/cordon/server/auth"
)

// Bounds of the requests that hold their connection long (api.Route.Held: an exec's
// stream, an export or a follow, a start, a stop, an upload, a download, a patch, a
// workspace's delete; a sweep, checkpoint or rollback, which a session's supervisor
// serves one at a time and may queue; an apply, discard or gate approval, which copy
// files or run an operation on the host). Such a request is serving, so the listener never closes it to
// admit another: without a bound, one tenant's streams would take every connection
// slot and lock every other tenant out. Each tenant may hold maxHeldPerTenant of them
// for each role the routes ask (its agents', its auditors'), so an auditor's follows
// never take the slots its agents need to exec, start and stop; and all tenants
// together half of a listener's maxConns, so the other half always serves short
// requests.
const (
	maxHeldPerTenant = 32
	maxHeld          = maxConns / 2

	heldQuota       = "held_requests"        // api.Error.Quota past maxHeldPerTenant
	serverHeldQuota = "server_held_requests" // past maxHeld
)

// heldLimiter counts the held requests per tenant and role.
type heldLimiter struct {
	mu    sync.Mutex // guards per and total
	per   map[heldKey]int
	total int
}

// heldKey is whose slots a held request takes: its tenant's, for the role its route
// asks.
type heldKey struct{ tenant, role string }

func newHeldLimiter() *heldLimiter { return &heldLimiter{per: map[heldKey]int{}} }

// acquire takes one of tenant's slots for role; the quota it is past when it cannot.
func (l *heldLimiter) acquire(tenant, role string) (release func(), quota string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := heldKey{tenant, role}
	switch {
	case l.per[k] >= maxHeldPerTenant:
		return nil, heldQuota
	case l.total >= maxHeld:
		return nil, serverHeldQuota
	}
	l.per[k]++
	l.total++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.per[k]--; l.per[k] == 0 {
				delete(l.per, k)
			}
			l.total--
		})
	}, ""
}

// held wraps the handler of a held route asking role: past a bound it answers 429
// with the quota named, at once; no request waits in a queue for a slot.
func (s *Server) held(h handler, role string) handler {
	return func(w http.ResponseWriter, r *http.Request, id auth.Identity) {
		release, quota := s.heldReqs.acquire(id.Tenant, role)
		if release == nil {
			limit := maxHeldPerTenant
			if quota == serverHeldQuota {
				limit = maxHeld
			}
			s.metrics.refused(id.Tenant, quota)
			w.Header().Set("Retry-After", "1")
			writeJSON(w, http.StatusTooManyRequests, api.Error{Quota: quota,
				Error: fmt.Sprintf("%s: at most %d long requests (exec, export, follow, start, stop, sweep, checkpoint, rollback, upload, download, patch, delete, apply, discard, approve) at a time", quota, limit)})
			return
		}
		defer release()
		h(w, r, id)
	}
}
