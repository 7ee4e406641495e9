package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/cordonhq/cordon/server/auth"
	"github.com/cordonhq/cordon/server/config"
)

// routes is the API. The mux answers 404 for an unknown route and 405 (with Allow) for
// a known one asked with another method (a catch-all route would turn those 405s into
// 404s, so there is none).
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/health", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Connection", "close") // an unauthenticated client keeps no connection
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	})
	mux.Handle("GET /v1/whoami", s.authed(0, s.whoami))
	mux.Handle("POST /v1/sessions", s.authed(config.RoleAgent, s.startSession))
	return s.logged(limitBody(mux))
}

// whoamiResponse is GET /v1/whoami: the tenant and roles of the credential the
// request was authenticated as.
type whoamiResponse struct {
	Tenant     string   `json:"tenant"`
	Credential string   `json:"credential"`
	Roles      []string `json:"roles"`
}

func (s *Server) whoami(w http.ResponseWriter, _ *http.Request, id auth.Identity) {
	writeJSON(w, http.StatusOK, whoamiResponse{Tenant: id.Tenant, Credential: id.Credential, Roles: id.Roles.Names()})
}

// startRequest is POST /v1/sessions. Only its decoding is served yet.
type startRequest struct {
	Contract string `json:"contract"` // the contract's YAML; "" for the tenant's base contract
}

func (s *Server) startSession(w http.ResponseWriter, r *http.Request, _ auth.Identity) {
	var req startRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	writeError(w, http.StatusNotImplemented, "sessions are not served yet")
}

// authed runs h for a request whose credential holds every role of need (none: any
// credential). Who the caller is comes from one place: the bearer token when an
// Authorization header is sent (a bad one is not retried any other way), else the
// verified client certificate, else the unix peer's uid.
func (s *Server) authed(need config.Roles, h func(http.ResponseWriter, *http.Request, auth.Identity)) http.Handler {
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
		return s.auth.Token(tok)
	}
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		// Verified in the handshake against client_ca (VerifyClientCertIfGiven).
		return s.auth.Cert(r.TLS.PeerCertificates[0])
	}
	if uid, ok := peerUID(r.Context()); ok {
		return s.auth.UID(uid)
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
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if dec.Decode(&struct{}{}) != io.EOF {
			err = errors.New("want one JSON value")
		}
	}
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

type errorResponse struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorResponse{Error: msg})
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
