package server

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/server/api"
)

// validate checks the JSON value data against schema, the subset of JSON Schema that
// package api generates ($ref, anyOf, type, properties, required,
// additionalProperties, items, minimum, format date-time, contentEncoding base64). A
// keyword outside it is an error, so the generator cannot outgrow the validator
// unnoticed. doc resolves the $refs.
func validate(doc map[string]any, schema any, data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return check(doc, schema, v, "$")
}

var keywords = []string{"$ref", "anyOf", "type", "properties", "required", "additionalProperties", "items", "minimum", "format", "contentEncoding", "description"}

func check(doc map[string]any, schema, v any, at string) error {
	sch, ok := schema.(map[string]any)
	if !ok {
		return fmt.Errorf("%s: the schema %v is not an object", at, schema)
	}
	for k := range sch {
		if !slices.Contains(keywords, k) {
			return fmt.Errorf("%s: keyword %q is not one the validator knows", at, k)
		}
	}
	if ref, ok := sch["$ref"].(string); ok {
		target, err := api.Resolve(doc, ref)
		if err != nil {
			return err
		}
		return check(doc, target, v, at)
	}
	if any, ok := sch["anyOf"].([]any); ok {
		var errs []string
		for _, s := range any {
			err := check(doc, s, v, at)
			if err == nil {
				return nil
			}
			errs = append(errs, err.Error())
		}
		return fmt.Errorf("%s: none of anyOf: %s", at, strings.Join(errs, "; "))
	}
	if t, ok := sch["type"]; ok && !typeIs(t, v) {
		return fmt.Errorf("%s: %s is not of type %v", at, kindOf(v), t)
	}
	switch v := v.(type) {
	case map[string]any:
		return checkObject(doc, sch, v, at)
	case []any:
		if items, ok := sch["items"]; ok {
			for i, e := range v {
				if err := check(doc, items, e, fmt.Sprintf("%s[%d]", at, i)); err != nil {
					return err
				}
			}
		}
	case string:
		if sch["format"] == "date-time" {
			if _, err := time.Parse(time.RFC3339Nano, v); err != nil {
				return fmt.Errorf("%s: not a date-time: %w", at, err)
			}
		}
		if sch["contentEncoding"] == "base64" {
			if _, err := base64.StdEncoding.DecodeString(v); err != nil {
				return fmt.Errorf("%s: not base64: %w", at, err)
			}
		}
	case json.Number:
		if min, ok := sch["minimum"].(float64); ok {
			if f, _ := v.Float64(); f < min {
				return fmt.Errorf("%s: %s is below the minimum %v", at, v, min)
			}
		}
	}
	return nil
}

func checkObject(doc map[string]any, sch map[string]any, v map[string]any, at string) error {
	props, _ := sch["properties"].(map[string]any)
	for _, r := range asSlice(sch["required"]) {
		if _, ok := v[r.(string)]; !ok {
			return fmt.Errorf("%s: the required %q is missing", at, r)
		}
	}
	for k, e := range v {
		s, ok := props[k]
		if !ok {
			switch extra := sch["additionalProperties"].(type) {
			case bool:
				if !extra {
					return fmt.Errorf("%s: %q is not a property of the schema", at, k)
				}
				continue
			case nil:
				continue
			default:
				s = extra
			}
		}
		if err := check(doc, s, e, at+"."+k); err != nil {
			return err
		}
	}
	return nil
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

func typeIs(t, v any) bool {
	switch t := t.(type) {
	case string:
		k := kindOf(v)
		return k == t || t == "number" && k == "integer"
	case []any:
		for _, e := range t {
			if typeIs(e, v) {
				return true
			}
		}
	}
	return false
}

func kindOf(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	case json.Number:
		if _, err := v.Int64(); err == nil {
			return "integer"
		}
		return "number"
	}
	return fmt.Sprintf("%T", v)
}

// TestValidatorRefuses: the validator fails what does not match, so the conformance
// test can fail.
func TestValidatorRefuses(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(api.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	ref := func(name string) any { return map[string]any{"$ref": "#/components/schemas/" + name} }
	for _, tc := range []struct {
		schema any
		body   string
		ok     bool
	}{
		{ref("Whoami"), `{"tenant":"a","credential":"b","roles":["agent"]}`, true},
		{ref("Whoami"), `{"tenant":"a","credential":"b","roles":null}`, true},
		{ref("Whoami"), `{"tenant":"a","credential":"b"}`, false},
		{ref("Whoami"), `{"tenant":"a","credential":"b","roles":[],"x":1}`, false},
		{ref("Whoami"), `{"tenant":1,"credential":"b","roles":[]}`, false},
		{ref("Whoami"), `{"tenant":"a","credential":"b","roles":[1]}`, false},
		{ref("Error"), `{"error":"x"}`, true},
		{ref("Error"), `{"error":"x","quota":"sessions"}`, true},
		{ref("Error"), `"x"`, false},
		{ref("Session"), `{"id":"a","state":"running","started":"2026-01-02T03:04:05Z","backend":"bwrap","workspace":"w","stage":false,"warm":false}`, true},
		{ref("Session"), `{"id":"a","state":"running","started":"yesterday","backend":"bwrap","workspace":"w","stage":false,"warm":false}`, false},
		{ref("Frame"), `{"fd":1,"data":"aGk="}`, true},
		{ref("Frame"), `{"fd":1,"data":"not base64!"}`, false},
		{ref("Frame"), `{"fd":1.5}`, false},
		{ref("Nope"), `{}`, false},
		{map[string]any{"oneOf": []any{}}, `{}`, false},
	} {
		err := validate(doc, tc.schema, []byte(tc.body))
		if (err == nil) != tc.ok {
			t.Errorf("%v %s: got %v; want ok=%v", tc.schema, tc.body, err, tc.ok)
		}
	}
}
