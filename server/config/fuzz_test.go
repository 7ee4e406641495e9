package config

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParse: no input panics or hangs the decoder, and every refusal is made of
// positioned one-line errors naming the file.
func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte(base + "  - {name: a, root: /a}\n  - {name: a, root: /a/b}\n"))
	f.Add([]byte("version: 1\nlisten: &l {unix: {path: /s}}\ntenants: [{name: a, root: *l}]\n"))
	f.Add([]byte("version: 1\nlisten: {tcp: {address: ':1'}}\ntenants: [{<<: {name: a}}]\n"))
	f.Add([]byte("a: [[[[[[[[[[[[[[\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("f.yaml", data)
		if err == nil {
			if c == nil || len(c.Tenants) == 0 || (c.Listen.Unix == nil && c.Listen.TCP == nil) {
				t.Fatalf("accepted an incomplete config: %+v", c)
			}
			return
		}
		for _, line := range strings.Split(err.Error(), "\n") {
			if !strings.HasPrefix(line, "f.yaml") {
				t.Fatalf("error line without the file: %q", line)
			}
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("error is not a *config.Error: %T %v", err, err)
		}
	})
}
