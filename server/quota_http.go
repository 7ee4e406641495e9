package server

import (
	"errors"
	"math"
	"net/http"
	"strconv"

	"github.com/cordonhq/cordon/server/api"
	"github.com/cordonhq/cordon/server/quota"
)

// writeQuotaError answers a reservation refused past a quota: 429 Too Many
// Requests, Retry-After in whole seconds (at least 1), and the quota it is about in
// api.Error.Quota.
func writeQuotaError(w http.ResponseWriter, e *quota.Exceeded) {
	w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(e)))
	writeJSON(w, http.StatusTooManyRequests, api.Error{Error: e.Error(), Quota: e.Quota})
}

func retryAfterSeconds(e *quota.Exceeded) int {
	s := math.Ceil(e.RetryAfter.Seconds())
	return int(min(max(s, 1), 3600))
}

// refuse answers a start refused by the tenant's quotas (writeReserveError), and
// counts and logs a refusal past a quota.
func (s *Server) refuse(w http.ResponseWriter, roots tenantRoots, err error) {
	var e *quota.Exceeded
	if errors.As(err, &e) {
		s.metrics.refused(roots.t.Name, e.Quota)
		s.log.Info("session refused: quota", logTenant, roots.t.Name, logQuota, e.Quota, logReason, e.Detail)
	}
	writeReserveError(w, err)
}

// writeReserveError answers an error of quota.Fit or Ledger.Reserve: 429 past a
// quota (writeQuotaError); 400 for a session asking more than the whole quota, or
// no limit (no retry could succeed); 500 otherwise (an unknown tenant is a bug: the
// caller was authenticated as one; an audit root that could not be measured).
func writeReserveError(w http.ResponseWriter, err error) {
	var e *quota.Exceeded
	switch {
	case errors.As(err, &e):
		writeQuotaError(w, e)
	case errors.Is(err, quota.ErrTooLarge):
		writeError(w, http.StatusBadRequest, err.Error())
	default:
		writeError(w, http.StatusInternalServerError, "reserving the session's quota failed")
	}
}
