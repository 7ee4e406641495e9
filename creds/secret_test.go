package creds_test

import (
	"bytes"
	"encoding/gob"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/creds"
)

const value = "s3cr3t-VALUE-that-must-not-leak"

func TestSecretNeverPrinted(t *testing.T) {
	s := creds.NewSecret(value)
	g := creds.Grant{Name: "TOK", Secret: s}
	type hidden struct{ s creds.Secret } // fmt cannot call methods on an unexported field
	args := map[string]any{
		"secret": s, "*secret": &s, "grant": g, "*grant": &g, "slice": []creds.Secret{s},
		"map": map[string]creds.Secret{"k": s}, "unexported field": hidden{s}, "*unexported": &hidden{s},
		"any": []any{s},
	}
	for name, arg := range args {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%T", "%10.3v"} {
			out := fmt.Sprintf(verb, arg)
			if strings.Contains(out, value) || strings.Contains(out, fmt.Sprintf("%x", value)) || strings.Contains(out, fmt.Sprintf("%X", value)) {
				t.Errorf("Sprintf(%s, %s) = %s", verb, name, out)
			}
		}
	}
	if got := fmt.Sprint(s); got != "[REDACTED]" {
		t.Errorf("Sprint = %q", got)
	}
	if got := fmt.Sprintf("%#v", s); got != "[REDACTED]" {
		t.Errorf("%%#v = %q", got)
	}
	if s.Reveal() != value {
		t.Error("Reveal lost the value")
	}
}

func TestSecretNeverLogged(t *testing.T) {
	s := creds.NewSecret(value)
	for _, h := range []func(*bytes.Buffer) slog.Handler{
		func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
		func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
	} {
		var buf bytes.Buffer
		log := slog.New(h(&buf))
		log.Info("issued", "secret", s, "grant", creds.Grant{Secret: s}, "ptr", &s, slog.Any("any", s), slog.Group("g", "s", s))
		if strings.Contains(buf.String(), value) || !strings.Contains(buf.String(), "[REDACTED]") {
			t.Errorf("log line: %s", buf.String())
		}
	}
}

func TestSecretRefusesMarshalling(t *testing.T) {
	s := creds.NewSecret(value)
	for name, v := range map[string]any{"secret": s, "grant": creds.Grant{Secret: s}, "map": map[string]any{"s": s}} {
		// (A Secret cannot be a map key: it is not comparable, which the compiler checks.)
		_, err := json.Marshal(v)
		if !errors.Is(err, creds.ErrMarshalSecret) {
			t.Errorf("json.Marshal(%s): %v; want ErrMarshalSecret", name, err)
		}
	}
	if out, err := xml.Marshal(struct{ S creds.Secret }{s}); err == nil || bytes.Contains(out, []byte(value)) {
		t.Errorf("xml.Marshal: %s, %v", out, err)
	}
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(struct{ S creds.Secret }{s}); err == nil || bytes.Contains(buf.Bytes(), []byte(value)) {
		t.Errorf("gob: %v", err)
	}
	if _, err := s.MarshalText(); !errors.Is(err, creds.ErrMarshalSecret) {
		t.Errorf("MarshalText: %v", err)
	}
}

func TestSecretZero(t *testing.T) {
	var s creds.Secret
	if !s.IsZero() || s.Reveal() != "" || fmt.Sprint(s) != "[REDACTED]" {
		t.Error("the zero Secret is not empty")
	}
	if !creds.NewSecret("").IsZero() || creds.NewSecret("x").IsZero() {
		t.Error("IsZero")
	}
}
