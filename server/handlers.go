package server

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"time"

	"github.com/cordonhq/cordon/server/api"
	"github.com/cordonhq/cordon/server/auth"
	"github.com/cordonhq/cordon/server/config"
)

// handler is one route's handler: it is given who the caller is.
type handler func(http.ResponseWriter, *http.Request, auth.Identity)

// routes is the API: every route of [api.Routes], with the handler handlers gives it
// (one without a handler yet answers 501), behind authentication and the role the
// route names. The mux answers 404 for an unknown route and 405 (with Allow) for a
// known one asked with another method (a catch-all route would turn those 405s into
// 404s, so there is none). A handler for a route the table does not have is a bug
// caught at start.
func (s *Server) routes() http.Handler {
	hs := s.handlers()
	mux := http.NewServeMux()
	for _, rt := range api.Routes {
		pattern := rt.Method + " " + rt.Path
		h, ok := hs[pattern]
		delete(hs, pattern)
		if !ok {
			h = notServed
		}
		if rt.IsHeld() {
			h = s.held(h, rt.Role)
		}
		// A JSON body is bounded here; a raw one (a tar) by its handler, to the
		// tenant's own limit.
		limit := limitBody
		if rt.RawRequest != "" {
			limit = func(h http.Handler) http.Handler { return h }
		}
		if rt.Role == api.Public {
			mux.Handle(pattern, limit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h(w, r, auth.Identity{}) })))
			continue
		}
		need, err := config.ParseRole(rt.Role)
		if err != nil {
			panic("api route " + pattern + ": " + err.Error())
		}
		mux.Handle(pattern, limit(s.authed(need, h)))
	}
	for pattern := range hs {
		panic("a handler for " + pattern + ", which api.Routes does not have")
	}
	return s.logged(s.metrics.instrument(mux))
}

// handlers maps "METHOD PATH" of api.Routes to its handler.
func (s *Server) handlers() map[string]handler {
	hs := map[string]handler{
		"GET /v1/health":                    health,
		"GET /v1/whoami":                    s.whoami,
		"GET /v1/openapi.json":              openAPI,
		"POST /v1/sessions":                 s.startSession,
		"GET /v1/sessions":                  s.listSessions,
		"GET /v1/sessions/{id}":             s.getSession,
		"POST /v1/sessions/{id}/exec":       s.execSession,
		"POST /v1/sessions/{id}/sweep":      s.sweepSession,
		"POST /v1/sessions/{id}/checkpoint": s.checkpointSession,
		"POST /v1/sessions/{id}/rollback":   s.rollbackSession,
		"POST /v1/sessions/{id}/stop":       s.stopSession,
	}
	maps.Copy(hs, s.workspaceHandlers())
	maps.Copy(hs, s.gateHandlers())
	maps.Copy(hs, s.auditHandlers())
	maps.Copy(hs, s.stageHandlers())
	maps.Copy(hs, s.mcpHandlers())
	return hs
}

func health(w http.ResponseWriter, _ *http.Request, _ auth.Identity) {
	w.Header().Set("Connection", "close") // an unauthenticated client keeps no connection
	writeJSON(w, http.StatusOK, api.Health{OK: true})
}

func notServed(w http.ResponseWriter, _ *http.Request, _ auth.Identity) {
	writeError(w, http.StatusNotImplemented, "not served yet")
}

func (s *Server) whoami(w http.ResponseWriter, _ *http.Request, id auth.Identity) {
	writeJSON(w, http.StatusOK, api.Whoami{Tenant: id.Tenant, Credential: id.Credential, Roles: id.Roles.Names()})
}

// authed runs h for a request whose credential holds every role of need (none: any
// credential). Who the caller is comes from one place: the bearer token when an
// Authorization header is sent (a bad one is not retried any other way), else the
// verified client certificate, else the unix peer's uid.
func (s *Server) authed(need config.Roles, h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := s.identify(r)
		if !ok {
			w.Header().Set("Connection", "close") // an unauthenticated client keeps no connection
			w.Header().Set("WWW-Authenticate", `Bearer realm="cordon"`)
			writeError(w, http.StatusUnauthorized, "unauthorized")
			return
		}
		setIdentity(r, id)
		if need != 0 && !id.Roles.Has(need) {
			writeError(w, http.StatusForbidden, "this credential does not have the "+need.String()+" role")
			return
		}
		h(w, r, id)
	})
}

func (s *Server) identify(r *http.Request) (auth.Identity, bool) {
	if hs := r.Header.Values("Authorization"); len(hs) > 0 {
		tok, ok := auth.Bearer(hs[0])
		if len(hs) != 1 || !ok {
			return auth.Identity{}, false
		}
		return s.auth.Load().Token(tok)
	}
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		// Verified in the handshake against client_ca (VerifyClientCertIfGiven).
		return s.auth.Load().Cert(r.TLS.PeerCertificates[0])
	}
	if uid, ok := peerUID(r.Context()); ok {
		return s.auth.Load().UID(uid)
	}
	return auth.Identity{}, false
}

// limitBody refuses a body larger than maxBody: at once when its length is declared,
// and when reading past the limit otherwise.
func limitBody(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > maxBody {
			w.Header().Set("Connection", "close")
			writeError(w, http.StatusRequestEntityTooLarge, "request body too large")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		h.ServeHTTP(w, r)
	})
}

// decodeJSON decodes the request body into v: one JSON value, no unknown field. On a
// failure it has answered (400, 413 or 415) and returns false.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, "want Content-Type: application/json")
		return false
	}
	err := decodeStrict(r.Body, v)
	var tooBig *http.MaxBytesError
	switch {
	case err == nil:
		return true
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, "request body too large")
	default:
		writeError(w, http.StatusBadRequest, "invalid request body: "+err.Error())
	}
	return false
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, api.Error{Error: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// identityKey is where a request's context keeps, for the access log, who it was.
type identityKey struct{}

type identityBox struct{ id auth.Identity }

func setIdentity(r *http.Request, id auth.Identity) {
	if b, ok := r.Context().Value(identityKey{}).(*identityBox); ok {
		b.id = id
	}
}

// statusWriter records the status a handler answered with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

// Unwrap lets an http.ResponseController reach the connection: flushing a stream,
// moving its deadlines.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

// logged writes one access log line per request: method, path, status, tenant and
// credential (when authenticated) and duration. Never a header or body.
func (s *Server) logged(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		box := &identityBox{}
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), identityKey{}, box)))
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		s.log.Info("request", logMethod, r.Method, logPath, r.URL.Path, logStatus, sw.status,
			logTenant, box.id.Tenant, logCredential, box.id.Credential, logDuration, time.Since(start))
	})
}
