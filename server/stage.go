package server

import (
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/runner"
	"github.com/cordonhq/cordon/server/api"
	"github.com/cordonhq/cordon/server/auth"
)

// stageHandlers serves apply and discard of the staged runs in the caller's tenant's
// audit root, through the same functions as `cordon apply` and `cordon discard`
// (package runner): another tenant's run is not under this root, so it is 404 exactly
// as one that does not exist. What lands, lands only in the tenant's workspace root.
func (s *Server) stageHandlers() map[string]handler {
	return map[string]handler{
		"POST /v1/runs/{id}/apply":   s.applyRun,
		"POST /v1/runs/{id}/discard": s.discardRun,
	}
}

// applyRequest checks an apply's paths: bounded, each local to the workspace. On a
// bad one it has answered 400.
func applyRequest(w http.ResponseWriter, req api.ApplyRequest) bool {
	if len(req.Paths) > api.MaxApplyPaths {
		writeError(w, http.StatusBadRequest, "paths: more than 1024")
		return false
	}
	for _, p := range req.Paths {
		if p == "" || len(p) > api.MaxApplyPath || !filepath.IsLocal(p) || strings.ContainsRune(p, 0) {
			writeError(w, http.StatusBadRequest, "paths: each a path relative to the workspace, without '..', at most 4096 bytes")
			return false
		}
	}
	return true
}

func (s *Server) applyRun(w http.ResponseWriter, r *http.Request, id auth.Identity) {
	var req api.ApplyRequest
	if !decodeJSON(w, r, &req) || !applyRequest(w, req) {
		return
	}
	run, ok := s.openRun(w, r, id)
	if !ok {
		return
	}
	t := s.tenantOf(id)
	by := id.Tenant + "/" + id.Credential
	res, err := runner.Apply(run.ID, runner.ApplyOptions{AuditRoot: t.AuditRoot(), Paths: req.Paths, Force: req.Force,
		Stderr: io.Discard, By: by, Within: t.Workspaces()})
	if err != nil {
		s.stageError(w, id, "applying", err, res)
		return
	}
	s.log.Info("staged run applied", logTenant, id.Tenant, logCredential, id.Credential, "run", run.ID, "paths", len(res.Paths))
	writeJSON(w, http.StatusOK, stageResult(run.ID, by, res))
}

func (s *Server) discardRun(w http.ResponseWriter, r *http.Request, id auth.Identity) {
	run, ok := s.openRun(w, r, id)
	if !ok {
		return
	}
	by := id.Tenant + "/" + id.Credential
	res, err := runner.Discard(s.tenantOf(id).AuditRoot(), run.ID, runner.DiscardOptions{By: by})
	if err != nil {
		s.stageError(w, id, "discarding", err, res)
		return
	}
	s.log.Info("staged run discarded", logTenant, id.Tenant, logCredential, id.Credential, "run", run.ID, "paths", len(res.Paths))
	writeJSON(w, http.StatusOK, stageResult(run.ID, by, res))
}

// stageError answers a failed apply or discard. What the request could change is a
// 409 with runner's message (which names no host path): nothing staged, not finished,
// nothing staged at a path, conflicts (listed, with what would have been refused).
// Anything else is the server's own failure, logged with its detail.
func (s *Server) stageError(w http.ResponseWriter, id auth.Identity, what string, err error, res runner.StageResult) {
	switch {
	case errors.Is(err, errdefs.ErrDenied), errors.Is(err, errdefs.ErrInvalid):
		writeJSON(w, http.StatusConflict, api.Error{Error: errdefs.Message(err), Conflicts: res.Conflicts, Refused: res.Refused})
	default:
		s.internal(w, id, what, err)
	}
}

func stageResult(run, by string, res runner.StageResult) api.StageResult {
	return api.StageResult{Run: run, Paths: orEmpty(res.Paths), Refused: orEmpty(res.Refused), Conflicts: orEmpty(res.Conflicts),
		Quarantined: orEmpty(res.Quarantined), Pending: res.Pending, By: by}
}
