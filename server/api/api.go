// Package api is the wire of `cordon serve`'s HTTP API, version 1: every route, the
// role it needs, and the JSON bodies the server answers and its clients send (package
// session's remote client, `cordon --host`). One table, so the server's handlers, the
// client and /v1/openapi.json are held to the same thing (the server's tests check
// that every route here is served and nothing else is).
//
// Conventions: request bodies are one JSON object, Content-Type application/json, at
// most 1 MiB, unknown fields refused. Errors are [Error] with a 4xx or 5xx status.
// Another tenant's session, run or gate is 404, exactly as one that does not exist.
// An exec's answer is a stream (Content-Type application/x-ndjson) of
// session/wire.Frame lines: output chunks as they are produced ({"fd":1,"data":…}),
// then one last frame with the result or the error.
package api

import "slices"

// Prefix is the version every route is under.
const Prefix = "/v1"

// Content types.
const (
	JSON   = "application/json"
	NDJSON = "application/x-ndjson"
)

// Roles a route needs ("" for any authenticated credential; Public for none at all).
const (
	RoleAny      = ""
	RoleAgent    = "agent"
	RoleApprover = "approver"
	RoleAuditor  = "auditor"
	Public       = "public"
)

// Route is one endpoint: its method and path pattern (net/http's, {name} for a path
// segment), the role a credential needs for it, and its bodies (nil for none; a zero
// value of the Go type otherwise).
type Route struct {
	Method, Path string
	Role         string
	Summary      string
	Request      any
	Response     any
	Stream       bool // the response is NDJSON: one Response per line (session/wire.Frame for an exec)
	// Held: the request may hold its connection long (every stream, a start, a stop, a
	// transfer, any handler that lifts the connection's deadlines), so the server
	// bounds how many each tenant has at a time (429 past it).
	Held bool
	// Conflict: the route may answer 409, when the state of what it names refuses it
	// (a log that does not verify, nothing staged, conflicts).
	Conflict bool
	// RawRequest and RawResponse are the media types of a body that is not JSON (a
	// tar, a patch), streamed; Request or Response is nil then. A raw request body is
	// bounded by the route's own limit, not the 1 MiB of a JSON one.
	RawRequest, RawResponse string
}

// IsHeld reports whether the route's requests hold their connection long.
func (r Route) IsHeld() bool { return r.Held || r.Stream }

// Routes is the whole API: assembled from each resource's table.
var Routes = slices.Concat(baseRoutes, sessionRoutes, workspaceRoutes, gateRoutes, auditRoutes, stageRoutes, mcpRoutes)

var baseRoutes = []Route{
	{Method: "GET", Path: "/v1/health", Role: Public, Summary: "liveness; no credential", Response: Health{}},
	{Method: "GET", Path: "/v1/whoami", Role: RoleAny, Summary: "the tenant, credential and roles of the caller", Response: Whoami{}},
	{Method: "GET", Path: "/v1/openapi.json", Role: RoleAny, Summary: "this API's OpenAPI 3.1 document", Response: map[string]any{}},
}

// Error is every error answer. Quota names the quota a 429 is about (with a
// Retry-After header).
type Error struct {
	Error string `json:"error"`
	Quota string `json:"quota,omitempty"`
	// Conflicts and Refused are a refused apply's (409): the paths the workspace
	// changed underneath the stage, and what would not have landed anyway.
	Conflicts []string `json:"conflicts,omitempty"`
	Refused   []string `json:"refused,omitempty"`
}

// Health is GET /v1/health.
type Health struct {
	OK bool `json:"ok"`
}

// Whoami is GET /v1/whoami.
type Whoami struct {
	Tenant     string   `json:"tenant"`
	Credential string   `json:"credential"`
	Roles      []string `json:"roles"`
}
