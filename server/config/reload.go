package config

import (
	"bytes"
	"fmt"
	"reflect"

	"github.com/cordonhq/cordon/server/admit"
)

// ChangedBesidesCredentials names the first setting of next that differs from c's,
// credentials and positions in the file aside; "" when they differ only there. A
// running server takes a new config's credentials at once (a token revoked, a
// certificate mapped), and nothing else: listeners, roots, quotas, pools and base
// contracts are what its sessions were started and charged under.
func (c *Config) ChangedBesidesCredentials(next *Config) string {
	return changed("", reflect.ValueOf(*c), reflect.ValueOf(*next))
}

var (
	posType  = reflect.TypeFor[Pos]()
	baseType = reflect.TypeFor[*admit.Base]()
)

// changed walks a and b (of one type) and names the first difference, skipping
// positions, the tenants' credentials and the file's name.
func changed(path string, a, b reflect.Value) string {
	switch {
	case a.Type() == posType:
		return ""
	case a.Type() == baseType:
		if a.IsNil() != b.IsNil() || !a.IsNil() && !bytes.Equal(a.Interface().(*admit.Base).YAML(), b.Interface().(*admit.Base).YAML()) {
			return path
		}
		return ""
	}
	switch a.Kind() {
	case reflect.Struct:
		for i := range a.NumField() {
			f := a.Type().Field(i)
			if f.Name == "Credentials" || f.Name == "File" && a.Type() == reflect.TypeFor[Config]() || !f.IsExported() {
				continue
			}
			if p := changed(join(path, f.Name), a.Field(i), b.Field(i)); p != "" {
				return p
			}
		}
		return ""
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				return path
			}
			return ""
		}
		return changed(path, a.Elem(), b.Elem())
	case reflect.Slice:
		if a.Len() != b.Len() {
			return path
		}
		for i := range a.Len() {
			if p := changed(fmt.Sprintf("%s[%d]", path, i), a.Index(i), b.Index(i)); p != "" {
				return p
			}
		}
		return ""
	case reflect.Map:
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			return path
		}
		return ""
	default:
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			return path
		}
		return ""
	}
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
