package server

import (
	"errors"
	"net/http"
	"path/filepath"

	"github.com/cordonhq/cordon/gate"
	"github.com/cordonhq/cordon/server/api"
	"github.com/cordonhq/cordon/server/auth"
	"github.com/cordonhq/cordon/server/config"
)

// logSocket is the log key of a gate admin socket.
const logSocket = "socket"

// gateHandlers serves the gate routes over the caller's tenant's run root, through the
// same functions as `cordon gate` (package gate): a request of another tenant's run is
// not under this root, so it is 404 exactly as one that does not exist.
func (s *Server) gateHandlers() map[string]handler {
	return map[string]handler{
		"GET /v1/gates":               s.listGates,
		"GET /v1/gates/{id}":          s.showGate,
		"POST /v1/gates/{id}/approve": func(w http.ResponseWriter, r *http.Request, id auth.Identity) { s.decideGate(w, r, id, false) },
		"POST /v1/gates/{id}/deny":    func(w http.ResponseWriter, r *http.Request, id auth.Identity) { s.decideGate(w, r, id, true) },
	}
}

// tenantOf is the configured tenant of an authenticated caller.
func (s *Server) tenantOf(id auth.Identity) config.Tenant {
	for _, t := range s.cfg.Tenants {
		if t.Name == id.Tenant {
			return t
		}
	}
	panic("authenticated as tenant " + id.Tenant + ", which the config does not have")
}

// gateReport logs an admin socket that failed while listing; the caller gets the
// requests of the others.
func (s *Server) gateReport(id auth.Identity) func(sock string, err error) {
	return func(sock string, err error) {
		s.log.Warn("gate admin socket", logTenant, id.Tenant, logSocket, filepath.Base(sock), "error", err)
	}
}

func (s *Server) listGates(w http.ResponseWriter, r *http.Request, id auth.Identity) {
	ps := gate.PendingAll(r.Context(), s.tenantOf(id).RunRoot(), s.gateReport(id))
	writeJSON(w, http.StatusOK, api.GateList(gate.NewList(ps)))
}

// gateID is the request's {id}, validated; on a bad one it has answered 400.
func gateID(w http.ResponseWriter, r *http.Request) (string, bool) {
	gid := r.PathValue("id")
	if gate.ValidateID(gid) != nil {
		writeError(w, http.StatusBadRequest, "invalid gate request id (letters, digits and '-', at most 64)")
		return "", false
	}
	return gid, true
}

func noGate(w http.ResponseWriter, gid string) {
	writeError(w, http.StatusNotFound, "no pending gate request "+gid)
}

func (s *Server) showGate(w http.ResponseWriter, r *http.Request, id auth.Identity) {
	gid, ok := gateID(w, r)
	if !ok {
		return
	}
	p, err := gate.Find(r.Context(), s.tenantOf(id).RunRoot(), gid, s.gateReport(id))
	if err != nil {
		noGate(w, gid) // Find fails only with ErrNotFound
		return
	}
	writeJSON(w, http.StatusOK, api.GateShow(gate.NewShow(p)))
}

// decideGate approves or denies a pending request of the tenant's runs. The log
// records the approver as "tenant/credential": who it was is the server's to say.
func (s *Server) decideGate(w http.ResponseWriter, r *http.Request, id auth.Identity, deny bool) {
	gid, ok := gateID(w, r)
	if !ok {
		return
	}
	var req api.DenyRequest
	if deny {
		if !decodeJSON(w, r, &req) {
			return
		}
		if len(req.Why) > api.MaxWhy {
			writeError(w, http.StatusBadRequest, "why: longer than 4096 bytes")
			return
		}
	}
	d := gate.Decision{ID: gid, By: id.Tenant + "/" + id.Credential, Deny: deny, Why: req.Why}
	err := gate.Decide(r.Context(), s.tenantOf(id).RunRoot(), d)
	switch {
	case errors.Is(err, gate.ErrNotFound):
		noGate(w, gid)
		return
	case err != nil:
		s.log.Error("gate decision", logTenant, id.Tenant, "id", gid, "error", err)
		writeError(w, http.StatusBadGateway, "the run holding the request did not take the decision")
		return
	}
	out := api.GateDecision{ID: gid, Decision: "approved", By: d.By}
	if deny {
		out.Decision = "denied"
	}
	writeJSON(w, http.StatusOK, out)
}
