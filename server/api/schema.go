package api

import (
	"reflect"
	"strings"
	"time"
)

// schemas makes JSON Schemas (the subset OpenAPI 3.1 documents use) of Go types as
// encoding/json writes and reads them:
//
//   - a struct is an object under components/schemas, named as its Go type (prefixed
//     with its package's name when two packages' types share a name): a property per
//     exported field by its json tag, required unless omitempty, no other property;
//     an embedded struct's fields are its own;
//   - string, bool, integers and floats are string, boolean, integer and number;
//   - time.Time is a date-time string, []byte a base64 string;
//   - a slice or map (not omitempty) may be null, as encoding/json writes a nil one,
//     and so may a pointer; an interface is anything.
type schemas struct {
	defs  map[string]any
	names map[reflect.Type]string
	taken map[string]reflect.Type
}

// newSchemas returns an empty set of schemas.
func newSchemas() *schemas {
	return &schemas{defs: map[string]any{}, names: map[reflect.Type]string{}, taken: map[string]reflect.Type{}}
}

// Components is every named schema made so far, for components/schemas.
func (s *schemas) Components() map[string]any { return s.defs }

// Ref is the schema of v's type: a $ref for a struct, inline otherwise.
func (s *schemas) Ref(v any) map[string]any { return s.schema(reflect.TypeOf(v)) }

var (
	timeType  = reflect.TypeFor[time.Time]()
	bytesType = reflect.TypeFor[[]byte]()
)

func (s *schemas) schema(t reflect.Type) map[string]any {
	switch {
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case t == bytesType:
		return map[string]any{"type": "string", "contentEncoding": "base64"}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return nullable(s.schema(t.Elem()))
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return map[string]any{"type": "integer"}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer", "minimum": 0}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice, reflect.Array:
		return map[string]any{"type": "array", "items": s.schema(t.Elem())}
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			panic("api: schema of " + t.String() + ": only maps with string keys are JSON objects")
		}
		return map[string]any{"type": "object", "additionalProperties": s.schema(t.Elem())}
	case reflect.Interface:
		return map[string]any{}
	case reflect.Struct:
		return map[string]any{"$ref": "#/components/schemas/" + s.define(t)}
	}
	panic("api: no JSON schema for " + t.String())
}

// define names struct type t and adds its schema to the components once.
func (s *schemas) define(t reflect.Type) string {
	if name, ok := s.names[t]; ok {
		return name
	}
	name := t.Name()
	if other, ok := s.taken[name]; ok && other != t || name == "" {
		name = pkgName(t) + "." + t.Name()
	}
	s.names[t], s.taken[name] = name, t
	props, required := map[string]any{}, []any{}
	s.fields(t, props, &required)
	obj := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		obj["required"] = required
	}
	s.defs[name] = obj
	return name
}

func (s *schemas) fields(t reflect.Type, props map[string]any, required *[]any) {
	for f := range reflectFields(t) {
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				s.fields(ft, props, required)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		omit := hasOpt(opts, "omitempty") || hasOpt(opts, "omitzero")
		var sch map[string]any
		switch {
		case hasOpt(opts, "string"):
			sch = map[string]any{"type": "string"}
		case omit && f.Type.Kind() == reflect.Pointer: // nil is left out, never null
			sch = s.schema(f.Type.Elem())
		default:
			sch = s.schema(f.Type)
		}
		if k := f.Type.Kind(); !omit && (k == reflect.Slice || k == reflect.Map) {
			sch = nullable(sch)
		}
		if !omit {
			*required = append(*required, name)
		}
		props[name] = sch
	}
}

func reflectFields(t reflect.Type) func(func(reflect.StructField) bool) {
	return func(yield func(reflect.StructField) bool) {
		for i := range t.NumField() {
			if !yield(t.Field(i)) {
				return
			}
		}
	}
}

func hasOpt(opts, want string) bool {
	for o := range strings.SplitSeq(opts, ",") {
		if o == want {
			return true
		}
	}
	return false
}

// nullable is sch or null.
func nullable(sch map[string]any) map[string]any {
	if typ, ok := sch["type"].(string); ok {
		return with(sch, "type", []any{typ, "null"})
	}
	return map[string]any{"anyOf": []any{sch, map[string]any{"type": "null"}}}
}

func pkgName(t reflect.Type) string {
	p := t.PkgPath()
	return p[strings.LastIndex(p, "/")+1:]
}
