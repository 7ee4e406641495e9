package local

import (
	"encoding/json"
	"errors"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"time"
)

// HandlerConfig configures [NewHandler]. Zero fields mean defaults.
type HandlerConfig struct {
	// Root is the ledger's root, as given to [New]; required.
	Root string
	// Clock is the time tokens are checked against; nil means time.Now.
	Clock func() time.Time
	// Logger receives errors reading the store (never tokens); nil discards them.
	Logger *slog.Logger
}

// Introspection is the JSON answer of the introspection endpoint (RFC 7662 section
// 2.2). An inactive token gets {"active":false} and nothing else.
type Introspection struct {
	Active    bool   `json:"active"`
	Scope     string `json:"scope,omitempty"` // space-separated
	ExpiresAt int64  `json:"exp,omitempty"`   // seconds since the epoch
	IssuedAt  int64  `json:"iat,omitempty"`
	Subject   string `json:"sub,omitempty"`  // the run id
	TokenID   string `json:"jti,omitempty"`  // the grant's ID in the run's audit log
	Name      string `json:"name,omitempty"` // the credential's name in the contract
}

// maxIntrospectBody bounds a request body: a form with one token fits easily.
const maxIntrospectBody = 8 << 10

// NewHandler returns an http.Handler for RFC 7662 token introspection of local
// tokens: POST with a form body token=TOKEN (token_type_hint is ignored) answers
// [Introspection] as JSON. The token must be in the body, never the URL. The endpoint
// asks no credential of its caller: a token is 256 random bits, so asking about
// guesses learns nothing, and an inactive token's answer is the same whatever the
// reason. The handler is safe for concurrent use; mount it at /introspect.
func NewHandler(cfg HandlerConfig) http.Handler {
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &handler{cfg: cfg}
}

type handler struct {
	cfg HandlerConfig
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeJSON(w, http.StatusMethodNotAllowed, oauthError{"invalid_request"})
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/x-www-form-urlencoded" {
		writeJSON(w, http.StatusUnsupportedMediaType, oauthError{"invalid_request"})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxIntrospectBody)
	if err := r.ParseForm(); err != nil {
		writeJSON(w, http.StatusBadRequest, oauthError{"invalid_request"})
		return
	}
	tok := r.PostForm.Get("token")
	if tok == "" || r.URL.Query().Has("token") {
		writeJSON(w, http.StatusBadRequest, oauthError{"invalid_request"})
		return
	}
	info, err := Verify(h.cfg.Root, tok, nil, h.cfg.Clock())
	switch {
	case errors.Is(err, ErrInactive):
		writeJSON(w, http.StatusOK, Introspection{Active: false})
	case err != nil:
		h.cfg.Logger.Error("introspection: reading the token store", "err", err)
		writeJSON(w, http.StatusInternalServerError, oauthError{"server_error"})
	default:
		writeJSON(w, http.StatusOK, Introspection{
			Active: true, Scope: strings.Join(info.Scopes, " "),
			ExpiresAt: info.ExpiresAt.Unix(), IssuedAt: info.IssuedAt.Unix(),
			Subject: info.Run, TokenID: info.ID, Name: info.Name,
		})
	}
}

type oauthError struct {
	Error string `json:"error"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
