package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// OpenAPIVersion is the version of the OpenAPI specification [OpenAPI] follows.
const OpenAPIVersion = "3.1.0"

// OpenAPI is the API's OpenAPI document (GET /v1/openapi.json), generated once from
// [Routes] and the Go types of their bodies ([schemas] says how). It is the same bytes
// on every call: JSON objects are written with sorted keys.
var OpenAPI = sync.OnceValue(func() []byte {
	b, err := json.MarshalIndent(document(Routes), "", "  ")
	if err != nil {
		panic("api: the OpenAPI document does not marshal: " + err.Error()) // a bug in Document
	}
	return append(b, '\n')
})

// Security scheme names of the document. A route's roles are the scopes of its
// security requirement (OpenAPI 3.1 allows role names there for any scheme) and its
// x-cordon-role; the unix socket's peer uid has no OpenAPI scheme and is described in
// the document's info.
const (
	schemeBearer = "bearer"
	schemeMTLS   = "mtls"
)

// errorStatuses are the error answers a route may give, with when.
var errorStatuses = []struct {
	code int
	when func(Route) bool
}{
	{http.StatusBadRequest, func(r Route) bool { return hasBody(r) || strings.Contains(r.Path, "{") }}, // a body, or an id of the wrong shape
	{http.StatusUnauthorized, func(r Route) bool { return r.Role != Public }},
	{http.StatusForbidden, func(r Route) bool { return r.Role != Public && r.Role != RoleAny }},
	{http.StatusNotFound, func(r Route) bool { return strings.Contains(r.Path, "{") }},
	{http.StatusConflict, func(r Route) bool { return r.Conflict || strings.HasPrefix(r.Path, "/v1/workspaces/") }}, // a workspace not empty, or in use
	{http.StatusRequestEntityTooLarge, func(Route) bool { return true }},                                            // a declared length past the limit, on any route
	{http.StatusUnsupportedMediaType, func(r Route) bool { return hasBody(r) }},
	{http.StatusTooManyRequests, func(r Route) bool { return r.Role != Public }},
}

func hasBody(r Route) bool { return r.Request != nil || r.RawRequest != "" }

// raw is the schema of a body that is not JSON.
var raw = map[string]any{"type": "string", "format": "binary"}

// document is the OpenAPI document of routes, as JSON values (maps, slices, strings).
func document(routes []Route) map[string]any {
	s := newSchemas()
	errRef := s.Ref(Error{})
	paths := map[string]any{}
	for _, rt := range routes {
		item, _ := paths[rt.Path].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[rt.Path] = item
		}
		item[strings.ToLower(rt.Method)] = operation(s, rt, errRef)
	}
	return map[string]any{
		"openapi": OpenAPIVersion,
		"info": map[string]any{
			"title":   "cordon serve",
			"version": strings.TrimPrefix(Prefix, "/"),
			"description": "The HTTP API of `cordon serve` (docs/serve.md). Request bodies are one JSON object, " +
				"at most 1 MiB, unknown fields refused. Callers authenticate with a bearer token, a client " +
				"certificate (TCP with TLS) or, on the unix socket, their uid (SO_PEERCRED); the roles a " +
				"route needs are its security requirement's scopes and its x-cordon-role. Another tenant's " +
				"id is 404, exactly as a missing one.",
		},
		"paths": paths,
		"components": map[string]any{
			"schemas": s.Components(),
			"securitySchemes": map[string]any{
				schemeBearer: map[string]any{"type": "http", "scheme": "bearer"},
				schemeMTLS:   map[string]any{"type": "mutualTLS"},
			},
		},
	}
}

var pathParam = regexp.MustCompile(`\{([A-Za-z0-9_]+)\}`)

func operation(s *schemas, rt Route, errRef map[string]any) map[string]any {
	op := map[string]any{
		"operationId":   operationID(rt),
		"summary":       rt.Summary,
		"x-cordon-role": roleName(rt.Role),
	}
	var params []any
	for _, m := range pathParam.FindAllStringSubmatch(rt.Path, -1) {
		params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
	}
	if params != nil {
		op["parameters"] = params
	}
	switch {
	case rt.Request != nil:
		op["requestBody"] = map[string]any{"required": true, "content": map[string]any{JSON: map[string]any{"schema": s.Ref(rt.Request)}}}
	case rt.RawRequest != "":
		op["requestBody"] = map[string]any{"required": true, "content": map[string]any{rt.RawRequest: map[string]any{"schema": raw}}}
	}
	if rt.Role == Public {
		op["security"] = []any{}
	} else {
		scopes := []any{}
		if rt.Role != RoleAny {
			scopes = append(scopes, rt.Role)
		}
		op["security"] = []any{map[string]any{schemeBearer: scopes}, map[string]any{schemeMTLS: scopes}}
	}
	ok := map[string]any{"description": "OK"}
	switch {
	case rt.Stream:
		ok["description"] = "a stream of JSON lines, each one of the schema (an exec: output chunks as they come, the result or the error last)"
		ok["content"] = map[string]any{NDJSON: map[string]any{"schema": s.Ref(rt.Response)}} // the schema of each line
	case rt.Response != nil:
		ok["content"] = map[string]any{JSON: map[string]any{"schema": s.Ref(rt.Response)}}
	case rt.RawResponse != "":
		ok["content"] = map[string]any{rt.RawResponse: map[string]any{"schema": raw}}
	}
	errBody := map[string]any{"content": map[string]any{JSON: map[string]any{"schema": errRef}}}
	responses := map[string]any{"200": ok, "default": with(errBody, "description", "an error")}
	for _, e := range errorStatuses {
		if e.when(rt) {
			r := with(errBody, "description", http.StatusText(e.code))
			if e.code == http.StatusTooManyRequests {
				r["headers"] = map[string]any{"Retry-After": map[string]any{"description": "seconds to wait", "schema": map[string]any{"type": "integer"}}}
			}
			responses[strconv.Itoa(e.code)] = r
		}
	}
	op["responses"] = responses
	return op
}

func with(m map[string]any, k string, v any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for mk, mv := range m {
		out[mk] = mv
	}
	out[k] = v
	return out
}

func roleName(role string) string {
	if role == RoleAny {
		return "any"
	}
	return role
}

// operationID is "get_sessions_id" for GET /v1/sessions/{id}: unique as method and path are.
func operationID(rt Route) string {
	p := strings.TrimPrefix(rt.Path, Prefix+"/")
	p = strings.NewReplacer("{", "", "}", "", "/", "_", ".", "_", "-", "_").Replace(p)
	return strings.ToLower(rt.Method) + "_" + p
}

// Resolve is what ref (a local "#/…" JSON pointer) points at in doc, or an error.
func Resolve(doc map[string]any, ref string) (any, error) {
	rest, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, fmt.Errorf("$ref %q: only local references are made", ref)
	}
	var cur any = doc
	for _, tok := range strings.Split(rest, "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("$ref %q: %q is not in an object", ref, tok)
		}
		if cur, ok = m[tok]; !ok {
			return nil, fmt.Errorf("$ref %q: no %q", ref, tok)
		}
	}
	return cur, nil
}
