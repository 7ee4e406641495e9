package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/server/api"
)

// requestTypes are the request body types of api.Routes, one each.
func requestTypes() []reflect.Type {
	var ts []reflect.Type
	for _, rt := range api.Routes {
		if rt.Request == nil {
			continue
		}
		if t := reflect.TypeOf(rt.Request); !containsType(ts, t) {
			ts = append(ts, t)
		}
	}
	return ts
}

func containsType(ts []reflect.Type, t reflect.Type) bool {
	for _, e := range ts {
		if e == t {
			return true
		}
	}
	return false
}

// decodeBody runs decodeJSON on body into a new value of type t, as a handler does
// behind limitBody.
func decodeBody(t reflect.Type, body []byte) (any, bool, *httptest.ResponseRecorder) {
	v := reflect.New(t).Interface()
	r := httptest.NewRequest("POST", "/v1/x", bytes.NewReader(body))
	r.Header.Set("Content-Type", api.JSON)
	w := httptest.NewRecorder()
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	return v, decodeJSON(w, r, v), w
}

// TestDecodeJSONStrict: keys must name a field exactly, once. encoding/json alone
// matches keys case-insensitively (and by Unicode folding: "ſ" is "s", "K", the
// Kelvin sign, is "k") and takes the last of repeated keys, so a proxy or audit log
// in front that reads "argv" exactly, or the first one, would see another request
// than the one run.
func TestDecodeJSONStrict(t *testing.T) {
	typ := reflect.TypeFor[api.ExecRequest]()
	for body, ok := range map[string]bool{
		`{"argv":["true"]}`:                               true,
		`{"argv":["true"],"dir":"/w","cap":10}`:           true,
		`{"ARGV":["true"]}`:                               false,
		`{"Argv":["true"]}`:                               false,
		`{"argv":["true"],"argv":["rm","-rf","/"]}`:       false,
		`{"argv":["true"],"ſtdin":"aGk="}`:                false,
		`{"argv":["true"],"timeout_ms":1,"timeout_ms":2}`: false,
		`{"argv":["true"]} {"argv":["x"]}`:                false,
		`{"argv":"true"}`:                                 false,
		`{"argv":[` + strings.Repeat("[", 100) + `]}`:     false,
	} {
		_, got, w := decodeBody(typ, []byte(body))
		if got != ok {
			t.Errorf("%s: accepted %v (%d %s); want %v", body, got, w.Code, w.Body, ok)
		}
		if !got && w.Code != http.StatusBadRequest {
			t.Errorf("%s: %d; want 400", body, w.Code)
		}
	}
}

// FuzzDecodeJSON feeds each request type of api.Routes arbitrary bodies: decodeJSON
// never panics, never accepts a key that is not exactly one of the type's fields or
// is repeated, refuses with 400 or 413 and an api.Error, and accepts what it makes of
// an accepted body when encoded again.
func FuzzDecodeJSON(f *testing.F) {
	types := requestTypes()
	for i := range types {
		for _, seed := range []string{`{}`, `{"argv":["sh","-c","echo hi"],"stdin":"aGk=","timeout_ms":5}`,
			`{"contract":"version: 1","workspace":"w","stage":true}`, `{"name":"x"}`, `{"to":"-1"}`,
			`{"ARGV":[]}`, `{"to":"a","to":"b"}`, `[1,{"a":null}]`, `{"argv":null}`, `{"cap":1e400}`} {
			f.Add(uint8(i), []byte(seed))
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		typ := types[int(which)%len(types)]
		v, ok, w := decodeBody(typ, body)
		if !ok {
			var e api.Error
			if w.Code != http.StatusBadRequest && w.Code != http.StatusRequestEntityTooLarge || json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Error == "" {
				t.Fatalf("refused with %d %s; want 400 or 413 and an api.Error", w.Code, w.Body)
			}
			return
		}
		if len(body) > maxBody {
			t.Fatalf("accepted a body of %d bytes", len(body))
		}
		if bad := foreignKey(typ, body); bad != "" {
			t.Fatalf("accepted %q into %s: %s", body, typ, bad)
		}
		again, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok, w := decodeBody(typ, again); !ok {
			t.Fatalf("refused its own encoding %s: %s", again, w.Body)
		}
	})
}

// foreignKey is the first top-level key of body that is not exactly a json field name
// of typ, or is repeated; "" when there is none. (The request types are flat.)
func foreignKey(typ reflect.Type, body []byte) string {
	names := map[string]bool{}
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		names[name] = true
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return ""
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		key := tok.(string)
		switch {
		case !names[key]:
			return "unknown key " + key
		case seen[key]:
			return "repeated key " + key
		}
		seen[key] = true
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return ""
		}
	}
	return ""
}
