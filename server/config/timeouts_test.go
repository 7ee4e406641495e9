package config

import (
	"strings"
	"testing"
	"time"
)

// TestTimeouts: listen.timeouts, its defaults when the config sets none (or a Config
// built in Go leaves a field zero), and its refusals.
func TestTimeouts(t *testing.T) {
	c, err := Parse("f.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Listen.Timeouts.WithDefaults(), DefaultTimeouts(); got.Request != want.Request || got.Response != want.Response {
		t.Errorf("no listen.timeouts: %+v; want the defaults %+v", got, want)
	}
	if d := DefaultTimeouts(); d.Request != 30*time.Second || d.Response != time.Minute {
		t.Errorf("the defaults: %+v; want docs/serve.md's 30s and 60s", d)
	}
	set := strings.Replace(good, "listen:\n", "listen:\n  timeouts: {request: 2s}\n", 1)
	if c, err = Parse("f.yaml", []byte(set)); err != nil {
		t.Fatal(err)
	}
	if got := c.Listen.Timeouts; got.Request != 2*time.Second || got.Response != time.Minute {
		t.Errorf("timeouts: {request: 2s}: %+v; want 2s, and the default response", got)
	}
	if got := (Timeouts{Response: 3 * time.Second}).WithDefaults(); got.Request != 30*time.Second || got.Response != 3*time.Second {
		t.Errorf("a zero request timeout with defaults: %+v; want 30s, the response kept", got)
	}
	for yml, want := range map[string]string{
		"{request: 500ms}": `f.yaml:2:48: listen.timeouts.request: 500ms is out of range [1s, 1h0m0s]`,
		"{response: 2h}":   `f.yaml:2:49: listen.timeouts.response: 2h is out of range [1s, 1h0m0s]`,
		"{request: soon}":  `f.yaml:2:48: listen.timeouts.request: invalid duration "soon" (want e.g. 30m, 2h, 8h)`,
		"{idle: 1s}":       `f.yaml:2:39: listen.timeouts: unknown key "idle" (known: request, response)`,
	} {
		_, err := Parse("f.yaml", []byte("version: 1\nlisten: {unix: {path: /s}, timeouts: "+yml+"}\ntenants: [{name: a, root: /a}]\n"))
		if err == nil || err.Error() != want {
			t.Errorf("timeouts: %s: %v; want %s", yml, err, want)
		}
	}
}
