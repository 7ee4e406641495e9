package cli

import (
	"strings"
	"testing"
)

// TestHostRefusesLocalCommands: with a server named (--host or $CORDON_HOST), every
// command that acts on this host refuses, naming --host, instead of running here;
// those that drive a server, and those that act on neither, do not refuse.
func TestHostRefusesLocalCommands(t *testing.T) {
	t.Setenv("CORDON_HOST", "")
	refused := [][]string{
		{"run", "--", "true"}, {"apply", "last"}, {"discard", "last"}, {"gc"}, {"audit", "ls"}, {"gate", "ls"},
		{"backends"}, {"doctor"}, {"serve", "--config", "/nonexistent"},
	}
	for _, args := range refused {
		_, stderr, code := run(t, append([]string{"--host", "unix:///nonexistent.sock"}, args...)...)
		if code != 2 || !strings.Contains(stderr, "--host") || !strings.Contains(stderr, "works on this host only") {
			t.Errorf("cordon --host %q: exit %d, %q; want 2 naming --host", args, code, stderr)
		}
	}
	t.Setenv("CORDON_HOST", "unix:///nonexistent.sock")
	if _, stderr, code := run(t, "gc"); code != 2 || !strings.Contains(stderr, "$CORDON_HOST") {
		t.Errorf("CORDON_HOST gc: exit %d, %q", code, stderr)
	}
	// Those that drive a server get as far as dialling it (125: nothing answers).
	for _, args := range [][]string{{"session", "ls"}, {"session", "stop", "x"}, {"session", "sweep", "x"}, {"exec", "x", "--", "true"}, {"session", "start", "--workspace", "w"}} {
		if _, stderr, code := run(t, args...); code != 125 || !strings.Contains(stderr, "nonexistent.sock") {
			t.Errorf("CORDON_HOST %q: exit %d, %q; want 125 from dialling the server", args, code, stderr)
		}
	}
	if _, _, code := run(t, "version"); code != 0 {
		t.Errorf("CORDON_HOST version: exit %d", code)
	}
}

// TestHostCompanionsNeedHost: the token, CA and certificate flags without a host are
// usage errors, not silently ignored; --workspace likewise.
func TestHostCompanionsNeedHost(t *testing.T) {
	t.Setenv("CORDON_HOST", "")
	for _, args := range [][]string{
		{"--token-file", "/x", "session", "ls"}, {"session", "ls", "--tls-ca", "/x"}, {"exec", "--tls-cert", "/x", "id", "--", "true"},
		{"session", "start", "--workspace", "w"},
	} {
		if _, stderr, code := run(t, args...); code != 2 || !strings.Contains(stderr, "--host") {
			t.Errorf("%q: exit %d, %q; want 2 naming --host", args, code, stderr)
		}
	}
}

// TestHostRefusedSchemes: a token is never sent over plain HTTP.
func TestHostRefusedSchemes(t *testing.T) {
	t.Setenv("CORDON_TOKEN", "secret-token")
	_, stderr, code := run(t, "--host", "http://127.0.0.1:9", "session", "ls")
	if code != 2 || !strings.Contains(stderr, "https://") || strings.Contains(stderr, "secret-token") {
		t.Errorf("http:// host: exit %d, %q", code, stderr)
	}
}
