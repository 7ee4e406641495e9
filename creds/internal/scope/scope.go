// Package scope reads a credential's scope mapping (contract.Credential.Scope, decoded
// from YAML into map[string]any) strictly: wrong types and unknown keys are errors, and
// every problem is reported, not only the first.
package scope

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/cordonhq/cordon/internal/errdefs"
)

// Reader reads the keys of one scope. Call [Reader.Err] once every key is read.
type Reader struct {
	prefix string // e.g. "credentials GH_TOKEN: scope"
	m      map[string]any
	used   map[string]bool
	errs   []error
}

// New returns a Reader for m; prefix starts every error message.
func New(prefix string, m map[string]any) *Reader {
	return &Reader{prefix: prefix, m: m, used: map[string]bool{}}
}

func (r *Reader) errorf(format string, args ...any) {
	r.errs = append(r.errs, errdefs.Invalidf("%s.%s", r.prefix, fmt.Sprintf(format, args...)))
}

func (r *Reader) get(key string, required bool) (any, bool) {
	r.used[key] = true
	v, ok := r.m[key]
	if !ok || v == nil {
		if required {
			r.errorf("%s: required", key)
		}
		return nil, false
	}
	return v, true
}

// Has reports whether key is present.
func (r *Reader) Has(key string) bool {
	_, ok := r.m[key]
	return ok
}

// String reads a string.
func (r *Reader) String(key string, required bool) string {
	v, ok := r.get(key, required)
	if !ok {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		r.errorf("%s: want a string, got %T", key, v)
		return ""
	}
	if s == "" && required {
		r.errorf("%s: must not be empty", key)
	}
	return s
}

// Strings reads a list of non-empty strings; a required list must not be empty.
func (r *Reader) Strings(key string, required bool) []string {
	v, ok := r.get(key, required)
	if !ok {
		return nil
	}
	list, ok := v.([]any)
	if !ok {
		r.errorf("%s: want a list of strings, got %T", key, v)
		return nil
	}
	if len(list) == 0 && required {
		r.errorf("%s: must not be empty", key)
	}
	out := make([]string, 0, len(list))
	for i, e := range list {
		s, ok := e.(string)
		if !ok || s == "" {
			r.errorf("%s[%d]: want a non-empty string, got %v", key, i, e)
			continue
		}
		out = append(out, s)
	}
	return out
}

// StringMap reads a mapping of strings to strings; a required one must not be empty.
func (r *Reader) StringMap(key string, required bool) map[string]string {
	v, ok := r.get(key, required)
	if !ok {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		r.errorf("%s: want a mapping, got %T", key, v)
		return nil
	}
	if len(m) == 0 && required {
		r.errorf("%s: must not be empty", key)
	}
	out := make(map[string]string, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		s, ok := m[k].(string)
		if !ok {
			r.errorf("%s.%s: want a string, got %v", key, k, m[k])
			continue
		}
		out[k] = s
	}
	return out
}

// Int reads a non-negative integer; absent is 0.
func (r *Reader) Int(key string) int {
	v, ok := r.get(key, false)
	if !ok {
		return 0
	}
	var n int64
	switch x := v.(type) {
	case int:
		n = int64(x)
	case int64:
		n = x
	case uint64:
		n = int64(x)
	case float64:
		n = int64(x)
		if float64(n) != x {
			r.errorf("%s: want an integer, got %v", key, x)
			return 0
		}
	case string:
		var err error
		if n, err = strconv.ParseInt(x, 10, 32); err != nil {
			r.errorf("%s: want an integer, got %q", key, x)
			return 0
		}
	default:
		r.errorf("%s: want an integer, got %T", key, v)
		return 0
	}
	if n < 0 || n > 1<<31-1 {
		r.errorf("%s: out of range: %d", key, n)
		return 0
	}
	return int(n)
}

// Err reports every problem found so far, and every key that was not read (unknown
// keys are errors: a typo must not silently widen or drop a restriction).
func (r *Reader) Err() error {
	errs := slices.Clone(r.errs)
	for _, k := range slices.Sorted(maps.Keys(r.m)) {
		if !r.used[k] {
			errs = append(errs, errdefs.Invalidf("%s.%s: unknown key", r.prefix, k))
		}
	}
	return errors.Join(errs...)
}
