package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// maxDepth bounds how deeply a request body's arrays and objects may nest.
const maxDepth = 32

// decodeStrict decodes the one JSON value of r (bounded by its reader: limitBody's)
// into v, refusing an unknown field and what encoding/json lets through on its own: a
// key that names a field only when compared case-insensitively ("ARGV", or "ſtdin" by
// Unicode folding), a key repeated in one object (encoding/json keeps the last; a
// proxy or log in front may read the first), nesting past maxDepth, and anything after
// the value. What is decoded is then exactly what every other JSON reader sees.
func decodeStrict(r io.Reader, v any) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := checkKeys(dec, reflect.TypeOf(v), 0); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("want one JSON value")
	}
	dec = json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// checkKeys reads one JSON value from dec, checking each object's keys against t (nil
// for any value): a struct's by its exact json field names, any object's for
// repetition.
func checkKeys(dec *json.Decoder, t reflect.Type, depth int) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	if depth++; depth > maxDepth {
		return fmt.Errorf("nested deeper than %d", maxDepth)
	}
	if delim == '[' {
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for dec.More() {
			if err := checkKeys(dec, elem, depth); err != nil {
				return err
			}
		}
		_, err := dec.Token()
		return err
	}
	var fields map[string]reflect.Type
	var elem reflect.Type
	switch {
	case t == nil:
	case t.Kind() == reflect.Struct:
		fields = jsonFields(t, map[string]reflect.Type{})
	case t.Kind() == reflect.Map:
		elem = t.Elem()
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key := tok.(string)
		if seen[key] {
			return fmt.Errorf("the key %q is repeated", key)
		}
		seen[key] = true
		if fields != nil {
			ft, ok := fields[key]
			if !ok {
				return fmt.Errorf("unknown field %q", key)
			}
			elem = ft
		}
		if err := checkKeys(dec, elem, depth); err != nil {
			return err
		}
	}
	_, err = dec.Token()
	return err
}

// jsonFields adds the fields encoding/json reads of struct t, by exact name, to m.
func jsonFields(t reflect.Type, m map[string]reflect.Type) map[string]reflect.Type {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				jsonFields(ft, m)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = f.Type
	}
	return m
}
