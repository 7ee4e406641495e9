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

// Bounds of the requests that build a whole run's log in the daemon's memory (a
// show: up to maxShowBytes of log, a few times that while it is answered), within
// the held bound: maxLogDocsPerTenant at a time for each tenant's role, maxLogDocs
// for all tenants together, so the daemon's memory for them is bounded by a few
// hundred MiB whatever its clients ask at once.
const (
	maxLogDocsPerTenant = 2
	maxLogDocs          = 4

	logDocsQuota       = "log_documents"        // api.Error.Quota past maxLogDocsPerTenant
	serverLogDocsQuota = "server_log_documents" // past maxLogDocs
)

// heldLimiter counts the requests it admits per tenant and role.
type heldLimiter struct {
	maxPer, maxTotal     int    // bounds: per tenant and role, in all
	perQuota, totalQuota string // the quota past each
	what                 string // what is bounded, for the 429's message

	mu    sync.Mutex // guards per and total
	per   map[heldKey]int
	total int
}

// heldKey is whose slots a held request takes: its tenant's, for the role its route
// asks.
type heldKey struct{ tenant, role string }

func newHeldLimiter() *heldLimiter {
	return &heldLimiter{maxPer: maxHeldPerTenant, maxTotal: maxHeld, perQuota: heldQuota, totalQuota: serverHeldQuota,
		what: "long requests (exec, export, follow, show, verify, start, stop, sweep, checkpoint, rollback, upload, download, patch, delete, apply, discard, approve, deny)",
		per:  map[heldKey]int{}}
}

// newLogDocsLimiter bounds the shows of a whole run's log at a time.
func newLogDocsLimiter() *heldLimiter {
	return &heldLimiter{maxPer: maxLogDocsPerTenant, maxTotal: maxLogDocs, perQuota: logDocsQuota, totalQuota: serverLogDocsQuota,
		what: "shows of a whole run's log (GET /v1/runs/{id}; export streams it)", per: map[heldKey]int{}}
}

// acquire takes one of tenant's slots for role; the quota it is past when it cannot.
// The first slot of a tenant's role is never refused for the total (a fair share:
// the rtfix red team held all four shows with two tenants and starved a third).
func (l *heldLimiter) acquire(tenant, role string) (release func(), quota string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := heldKey{tenant, role}
	switch {
	case l.per[k] >= l.maxPer:
		return nil, l.perQuota
	case l.per[k] > 0 && l.total >= l.maxTotal:
		// A tenant's role holding none is always let in once, past the total: other
		// tenants together can never lock it out. The total is then exceeded by at
		// most one slot per tenant and role, which the configuration bounds.
		return nil, l.totalQuota
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
	return s.bounded(s.heldReqs, h, role)
}

// bounded wraps h so that l admits each request first: past its bound it answers 429
// with the quota named, at once.
func (s *Server) bounded(l *heldLimiter, h handler, role string) handler {
	return func(w http.ResponseWriter, r *http.Request, id auth.Identity) {
		release, quota := l.acquire(id.Tenant, role)
		if release == nil {
			limit := l.maxPer
			if quota == l.totalQuota {
				limit = l.maxTotal
			}
			s.metrics.refused(id.Tenant, quota)
			w.Header().Set("Retry-After", "1")
			writeJSON(w, http.StatusTooManyRequests, api.Error{Quota: quota,
				Error: fmt.Sprintf("%s: at most %d %s at a time", quota, limit, l.what)})
			return
		}
		defer release()
		h(w, r, id)
	}
}
