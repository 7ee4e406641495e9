package server

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/server/auth"
	"github.com/cordonhq/cordon/server/config"
)

func testServer(t *testing.T) (*Server, string) {
	t.Helper()
	tok, sum := auth.NewToken()
	cfg, err := config.Parse("t.yaml", []byte(`version: 1
listen: {unix: {path: /run/c.sock}}
tenants:
  - name: acme
    root: /srv/acme
    quotas: {disk: host} # nothing is mounted: Serve is not run
    credentials:
      - {name: root, roles: [auditor], uid: 0}
      - {name: ci, roles: [agent], token_sha256: `+sum+`}
`))
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return s, tok
}

// TestIdentifyOneSource: a request is authenticated from one source; a bad token sent
// by a mapped uid is 401, never the uid's credential.
func TestIdentifyOneSource(t *testing.T) {
	s, tok := testServer(t)
	h := s.routes()
	for _, tc := range []struct {
		name    string
		uid     int // -1: not a unix peer
		headers []string
		want    string
	}{
		{"uid 0 alone", 0, nil, `"credential":"root"`},
		{"a token from uid 0", 0, []string{"Bearer " + tok}, `"credential":"ci"`},
		{"a bad token from uid 0", 0, []string{"Bearer nope"}, `unauthorized`},
		{"another scheme from uid 0", 0, []string{"Basic " + tok}, `unauthorized`},
		{"two headers", -1, []string{"Bearer " + tok, "Bearer " + tok}, `unauthorized`},
		{"no source", -1, nil, `unauthorized`},
		{"unmapped uid", 1000, nil, `unauthorized`},
	} {
		r := httptest.NewRequest("GET", "/v1/whoami", nil)
		for _, v := range tc.headers {
			r.Header.Add("Authorization", v)
		}
		if tc.uid >= 0 {
			r = r.WithContext(context.WithValue(r.Context(), peerKey{}, tc.uid))
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if !strings.Contains(w.Body.String(), tc.want) {
			t.Errorf("%s: got %d %s; want %s", tc.name, w.Code, w.Body, tc.want)
		}
		if tc.want == "unauthorized" && (w.Code != http.StatusUnauthorized || w.Header().Get("WWW-Authenticate") == "") {
			t.Errorf("%s: got %d, WWW-Authenticate %q; want 401 with it", tc.name, w.Code, w.Header().Get("WWW-Authenticate"))
		}
	}
}

func TestDecodeJSON(t *testing.T) {
	s, tok := testServer(t)
	h := s.routes()
	for body, want := range map[string]int{
		`{"contract":"version: 1","workspace":".w"}`: http.StatusBadRequest, // a hidden workspace
		`{"contract":"","x":1}`:                      http.StatusBadRequest,
		`{"contract":""} {"contract":""}`:            http.StatusBadRequest,
		`[`:                                          http.StatusBadRequest,
		`{"contract":"` + strings.Repeat("a", maxBody) + `"}`: http.StatusRequestEntityTooLarge,
	} {
		r := httptest.NewRequest("POST", "/v1/sessions", strings.NewReader(body))
		r.ContentLength = -1 // as a chunked body: the limit is met while reading
		r.Header.Set("Authorization", "Bearer "+tok)
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("body %.40q: got %d %s; want %d", body, w.Code, w.Body, want)
		}
	}
}
