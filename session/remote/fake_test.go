package remote

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"sync"
	"testing"

	"github.com/cordonhq/cordon/server/api"
)

// fakeServer answers the routes of api.Routes as the real server checks requests:
// the method and path of a route in the table, the bearer token, Content-Type
// application/json for a route with a body (and no body for one without), one JSON
// value of the route's request type with no unknown field. A request that passes is
// handed to answer with its decoded body; one that does not fails the test and is
// answered as the server would.
type fakeServer struct {
	t      *testing.T
	token  string // "" accepts requests without one
	answer func(w http.ResponseWriter, r *http.Request, rt api.Route, body any)

	mu   sync.Mutex // guards seen
	seen []string   // "METHOD PATH" of every request that passed
}

func (f *fakeServer) handler() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range api.Routes {
		mux.HandleFunc(rt.Method+" "+rt.Path, func(w http.ResponseWriter, r *http.Request) { f.serve(w, r, rt) })
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		f.t.Errorf("%s %s: no such route in api.Routes", r.Method, r.URL.Path)
		writeAPIError(w, http.StatusNotFound, "not found")
	})
	return mux
}

func (f *fakeServer) serve(w http.ResponseWriter, r *http.Request, rt api.Route) {
	if rt.Role != api.Public && f.token != "" && r.Header.Get("Authorization") != "Bearer "+f.token {
		f.t.Errorf("%s %s: Authorization %q", r.Method, r.URL.Path, r.Header.Get("Authorization"))
		writeAPIError(w, http.StatusUnauthorized, "unauthorized")
		return
	}
	want := api.JSON
	if rt.Stream {
		want = api.NDJSON
	}
	if got := r.Header.Get("Accept"); got != want {
		f.t.Errorf("%s %s: Accept %q; want %q", r.Method, r.URL.Path, got, want)
	}
	var body any
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		f.t.Errorf("%s %s: body: %v", r.Method, r.URL.Path, err)
		writeAPIError(w, http.StatusRequestEntityTooLarge, "request body too large")
		return
	}
	if rt.Request == nil {
		if len(data) > 0 || r.Header.Get("Content-Type") != "" {
			f.t.Errorf("%s %s: a body (%q, Content-Type %q) on a route without one", r.Method, r.URL.Path, data, r.Header.Get("Content-Type"))
		}
	} else {
		if ct := r.Header.Get("Content-Type"); ct != api.JSON {
			f.t.Errorf("%s %s: Content-Type %q", r.Method, r.URL.Path, ct)
			writeAPIError(w, http.StatusUnsupportedMediaType, "want Content-Type: application/json")
			return
		}
		v := reflect.New(reflect.TypeOf(rt.Request))
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		err := dec.Decode(v.Interface())
		if err == nil && dec.Decode(&struct{}{}) != io.EOF {
			err = errors.New("want one JSON value")
		}
		if err != nil {
			f.t.Errorf("%s %s: body %s: %v", r.Method, r.URL.Path, data, err)
			writeAPIError(w, http.StatusBadRequest, "invalid request body: "+err.Error())
			return
		}
		body = v.Elem().Interface()
	}
	f.mu.Lock()
	f.seen = append(f.seen, rt.Method+" "+r.URL.Path)
	f.mu.Unlock()
	f.answer(w, r, rt, body)
}

func (f *fakeServer) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.seen...)
}

func writeAPIError(w http.ResponseWriter, status int, msg string) {
	writeAPIJSON(w, status, api.Error{Error: msg})
}

func writeAPIJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", api.JSON)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
