package server

import (
	"net/http"

	"github.com/cordonhq/cordon/server/api"
	"github.com/cordonhq/cordon/server/auth"
)

// openAPI answers GET /v1/openapi.json: the document generated from api.Routes.
// It asks for a credential (any role) like every route but the health check: it
// holds nothing secret, but an unauthenticated client gets nothing but liveness,
// not even which version of the API it would be attacking.
func openAPI(w http.ResponseWriter, _ *http.Request, _ auth.Identity) {
	w.Header().Set("Content-Type", api.JSON)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(api.OpenAPI())
}
