package api

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestOpenAPIDocument: the document is JSON, of the expected OpenAPI version, has an
// operation per route and no other, and every $ref in it resolves.
func TestOpenAPIDocument(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(OpenAPI(), &doc); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if doc["openapi"] != "3.1.0" {
		t.Errorf("openapi: got %v; want 3.1.0", doc["openapi"])
	}
	paths := doc["paths"].(map[string]any)
	ops := 0
	for p, item := range paths {
		for m := range item.(map[string]any) {
			ops++
			if !routed(strings.ToUpper(m), p) {
				t.Errorf("%s %s is in the document, not in Routes", m, p)
			}
		}
	}
	if ops != len(Routes) {
		t.Errorf("%d operations; want %d, one per route", ops, len(Routes))
	}
	refs := 0
	walk(doc, func(ref string) {
		refs++
		if _, err := Resolve(doc, ref); err != nil {
			t.Error(err)
		}
	})
	if refs == 0 {
		t.Error("no $ref in the document")
	}
}

func routed(method, path string) bool {
	for _, rt := range Routes {
		if rt.Method == method && rt.Path == path {
			return true
		}
	}
	return false
}

func walk(v any, ref func(string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if s, ok := e.(string); ok && k == "$ref" {
				ref(s)
			}
			walk(e, ref)
		}
	case []any:
		for _, e := range v {
			walk(e, ref)
		}
	}
}

// TestResolveRefusesDangling: Resolve fails for a $ref to nothing, so the test above can fail.
func TestResolveRefusesDangling(t *testing.T) {
	doc := map[string]any{"components": map[string]any{"schemas": map[string]any{"A": map[string]any{}}}}
	if _, err := Resolve(doc, "#/components/schemas/A"); err != nil {
		t.Errorf("A: %v", err)
	}
	for _, ref := range []string{"#/components/schemas/B", "other.json#/A", "#/components/x/A"} {
		if _, err := Resolve(doc, ref); err == nil {
			t.Errorf("%s resolved", ref)
		}
	}
}

type inner struct {
	N int `json:"n"`
}

type Embedded struct {
	E string `json:"e"`
}

type sample struct {
	Embedded
	When    time.Time         `json:"when"`
	Bytes   []byte            `json:"bytes,omitempty"`
	List    []string          `json:"list"`
	Opt     *inner            `json:"opt,omitempty"`
	Maybe   *inner            `json:"maybe"`
	Tags    map[string]uint16 `json:"tags,omitempty"`
	Skip    string            `json:"-"`
	NoTag   bool
	private int //lint:ignore U1000 an unexported field the schema must leave out
}

// TestSchemaOfGoTypes: how each kind of Go field is described.
func TestSchemaOfGoTypes(t *testing.T) {
	s := newSchemas()
	if got := s.Ref(sample{}); got["$ref"] != "#/components/schemas/sample" {
		t.Fatalf("ref: %v", got)
	}
	got, _ := json.Marshal(s.Components()["sample"])
	want := `{"additionalProperties":false,"properties":{` +
		`"NoTag":{"type":"boolean"},` +
		`"bytes":{"contentEncoding":"base64","type":"string"},` +
		`"e":{"type":"string"},` +
		`"list":{"items":{"type":"string"},"type":["array","null"]},` +
		`"maybe":{"anyOf":[{"$ref":"#/components/schemas/inner"},{"type":"null"}]},` +
		`"opt":{"$ref":"#/components/schemas/inner"},` +
		`"tags":{"additionalProperties":{"minimum":0,"type":"integer"},"type":"object"},` +
		`"when":{"format":"date-time","type":"string"}},` +
		`"required":["e","when","list","maybe","NoTag"],"type":"object"}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if _, ok := s.Components()["inner"]; !ok {
		t.Error("inner is not defined")
	}
	// Two types of one name get two names.
	type Error struct{}
	if a, b := s.Ref(api0Error{}), s.Ref(Error{}); a["$ref"] != "#/components/schemas/Error" || b["$ref"] != "#/components/schemas/api.Error" {
		t.Errorf("two types named Error: %v and %v", a, b)
	}
}

type api0Error = Error
