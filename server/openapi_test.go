package server

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/server/api"
	"github.com/cordonhq/cordon/server/auth"
	"github.com/cordonhq/cordon/server/config"
)

// conformance is a server with one token per role, the handler it serves and the
// OpenAPI document it serves.
type conformance struct {
	t      *testing.T
	s      *Server
	h      http.Handler
	tokens map[string]string // by role
	doc    map[string]any
}

func newConformance(t *testing.T) *conformance {
	t.Helper()
	c := &conformance{t: t, tokens: map[string]string{}}
	creds := ""
	for _, role := range []string{api.RoleAgent, api.RoleApprover, api.RoleAuditor} {
		tok, sum := auth.NewToken()
		c.tokens[role] = tok
		creds += "      - {name: " + role + ", roles: [" + role + "], token_sha256: " + sum + "}\n"
	}
	cfg, err := config.Parse("t.yaml", []byte("version: 1\nlisten: {unix: {path: /run/c.sock}}\ntenants:\n  - name: acme\n    root: /srv/acme\n    credentials:\n"+creds))
	if err != nil {
		t.Fatal(err)
	}
	if c.s, err = New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatal(err)
	}
	c.h = c.s.routes()
	if err := json.Unmarshal(api.OpenAPI(), &c.doc); err != nil {
		t.Fatal(err)
	}
	return c
}

// do sends one request: role "" sends no credential; contentType "" none.
func (c *conformance) do(method, path, role, contentType, body string, length int64) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if length != 0 {
		r.ContentLength = length
	}
	if role != "" {
		r.Header.Set("Authorization", "Bearer "+c.tokens[role])
	}
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	w := httptest.NewRecorder()
	c.h.ServeHTTP(w, r)
	return w
}

// conforms checks that the answer w of route rt is one the document lists for it, and
// that its body validates against the document's schema for it.
func (c *conformance) conforms(rt api.Route, what string, w *httptest.ResponseRecorder) {
	c.t.Helper()
	op, _ := c.doc["paths"].(map[string]any)[rt.Path].(map[string]any)[strings.ToLower(rt.Method)].(map[string]any)
	if op == nil {
		c.t.Fatalf("%s %s: not in the document", rt.Method, rt.Path)
	}
	responses := op["responses"].(map[string]any)
	resp, ok := responses[strconv.Itoa(w.Code)].(map[string]any)
	if !ok {
		if w.Code < 400 {
			c.t.Errorf("%s %s %s: %d is not in the document", rt.Method, rt.Path, what, w.Code)
			return
		}
		resp = responses["default"].(map[string]any)
	}
	content, _ := resp["content"].(map[string]any)
	if content == nil {
		if w.Body.Len() > 0 {
			c.t.Errorf("%s %s %s: %d has a body; the document has none", rt.Method, rt.Path, what, w.Code)
		}
		return
	}
	ct := w.Header().Get("Content-Type")
	media, ok := content[ct].(map[string]any)
	if !ok {
		c.t.Errorf("%s %s %s: %d answered %q; the document has %v", rt.Method, rt.Path, what, w.Code, ct, content)
		return
	}
	if err := validate(c.doc, media["schema"], w.Body.Bytes()); err != nil {
		c.t.Errorf("%s %s %s: %d %s: %v", rt.Method, rt.Path, what, w.Code, w.Body, err)
	}
}

// placeholder is rt's path with each {name} filled in.
func placeholder(path string) string {
	return pathParamRE.ReplaceAllString(path, "placeholder-1")
}

// TestConformance holds the handlers to the OpenAPI document: every route of
// api.Routes is served by the mux (its credential check answers, which only a matched
// route reaches), and its answers on the paths a unit test can reach (health, whoami,
// openapi, and 401, 403, 413, 415 and 400 on every route) are answers the document
// lists, with bodies that validate against its schemas.
func TestConformance(t *testing.T) {
	c := newConformance(t)
	for _, rt := range api.Routes {
		path := placeholder(rt.Path)
		holder := c.roleFor(rt)
		if rt.Role == api.Public {
			w := c.do(rt.Method, path, "", "", "", 0)
			if w.Code == http.StatusNotFound || w.Code == http.StatusMethodNotAllowed {
				t.Errorf("%s %s: %d; the route is not served", rt.Method, path, w.Code)
			}
			c.conforms(rt, "public", w)
		} else {
			w := c.do(rt.Method, path, "", "", "", 0)
			if w.Code != http.StatusUnauthorized {
				t.Errorf("%s %s without a credential: %d; want 401 (a route the mux does not serve is 404)", rt.Method, path, w.Code)
			}
			c.conforms(rt, "without a credential", w)
		}
		if other := c.roleLacking(rt); other != "" {
			w := c.do(rt.Method, path, other, "", "", 0)
			if w.Code != http.StatusForbidden {
				t.Errorf("%s %s as %s: %d; want 403", rt.Method, path, other, w.Code)
			}
			c.conforms(rt, "without its role", w)
		}
		tooLarge, ct := int64(maxBody+1), api.JSON
		if rt.RawRequest != "" { // bounded by the tenant's own limit
			tooLarge, ct = 1<<50, rt.RawRequest
		}
		w := c.do(rt.Method, path, holder, ct, "{}", tooLarge)
		if w.Code != http.StatusRequestEntityTooLarge {
			t.Errorf("%s %s with a body of %d declared: %d; want 413", rt.Method, path, tooLarge, w.Code)
		}
		c.conforms(rt, "too large", w)
		if rt.RawRequest != "" {
			w := c.do(rt.Method, path, holder, "text/plain", "x", 0)
			if w.Code != http.StatusUnsupportedMediaType {
				t.Errorf("%s %s as text/plain: %d; want 415", rt.Method, path, w.Code)
			}
			c.conforms(rt, "as text/plain", w)
		}
		if rt.Request == nil {
			continue
		}
		for _, tc := range []struct {
			what, ct, body string
			want           int
		}{
			{"as text/plain", "text/plain", "{}", http.StatusUnsupportedMediaType},
			{"with an unknown field", api.JSON, `{"no_such_field":1}`, http.StatusBadRequest},
			{"with two values", api.JSON, `{} {}`, http.StatusBadRequest},
		} {
			w := c.do(rt.Method, path, holder, tc.ct, tc.body, 0)
			c.conforms(rt, tc.what, w)
			switch {
			case w.Code == tc.want:
			case w.Code == http.StatusNotImplemented:
				t.Logf("%s %s: not served yet (501)", rt.Method, path)
			case w.Code == http.StatusNotFound && strings.Contains(rt.Path, "{"):
				// The id is looked up before the body is read: 404 for a missing one.
			default:
				t.Errorf("%s %s %s: %d %s; want %d", rt.Method, path, tc.what, w.Code, w.Body, tc.want)
			}
		}
	}
	for _, call := range []struct{ path, role string }{{"/v1/health", ""}, {"/v1/whoami", api.RoleAgent}, {"/v1/openapi.json", api.RoleAuditor}} {
		w := c.do("GET", call.path, call.role, "", "", 0)
		if w.Code != http.StatusOK {
			t.Errorf("GET %s: %d %s; want 200", call.path, w.Code, w.Body)
		}
		c.conforms(route(t, "GET", call.path), "", w)
	}
	if w := c.do("GET", "/v1/openapi.json", api.RoleAgent, "", "", 0); w.Body.String() != string(api.OpenAPI()) {
		t.Error("GET /v1/openapi.json is not api.OpenAPI()")
	}
}

// TestNothingElseAnswers: no path or method outside api.Routes is answered but with
// 404 or 405, even with a credential.
func TestNothingElseAnswers(t *testing.T) {
	c := newConformance(t)
	paths := []string{"/", "/v1", "/v1/", "/v2/health", "/v1/HEALTH", "/metrics", "/v1/metrics", "/debug/pprof/", "/v1/openapi.yaml"}
	for _, rt := range api.Routes {
		p := placeholder(rt.Path)
		paths = append(paths, p+"/", p+"/extra", strings.TrimSuffix(p, "/placeholder-1")+"/a/b")
	}
	for _, p := range paths {
		for _, m := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"} {
			if servedAt(m, p) {
				continue
			}
			w := c.do(m, p, api.RoleAgent, api.JSON, "{}", 0)
			if w.Code != http.StatusNotFound && w.Code != http.StatusMethodNotAllowed {
				t.Errorf("%s %s: %d %s; want 404 or 405", m, p, w.Code, w.Body)
			}
		}
	}
}

// servedAt reports whether a route of the table answers method on path; HEAD is
// answered where GET is.
func servedAt(method, path string) bool {
	for _, rt := range api.Routes {
		if (rt.Method == method || method == "HEAD" && rt.Method == "GET") && matches(rt.Path, path) {
			return true
		}
	}
	return false
}

// matches reports whether path matches pattern, each {name} one non-empty segment.
func matches(pattern, path string) bool {
	ps, ss := strings.Split(pattern, "/"), strings.Split(path, "/")
	if len(ps) != len(ss) {
		return false
	}
	for i := range ps {
		if ps[i] != ss[i] && !(pathParamRE.MatchString(ps[i]) && ss[i] != "") {
			return false
		}
	}
	return true
}

func route(t *testing.T, method, path string) api.Route {
	for _, rt := range api.Routes {
		if rt.Method == method && rt.Path == path {
			return rt
		}
	}
	t.Fatalf("no route %s %s", method, path)
	return api.Route{}
}

// roleFor is a role whose token may call rt.
func (c *conformance) roleFor(rt api.Route) string {
	if rt.Role == api.Public || rt.Role == api.RoleAny {
		return api.RoleAgent
	}
	return rt.Role
}

// roleLacking is a role whose token may not call rt, or "" when every one may.
func (c *conformance) roleLacking(rt api.Route) string {
	switch rt.Role {
	case api.Public, api.RoleAny:
		return ""
	case api.RoleAgent:
		return api.RoleAuditor
	}
	return api.RoleAgent
}

var pathParamRE = regexp.MustCompile(`\{[^}]+\}`)
