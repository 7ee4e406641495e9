package sandbox_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/secret"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// TestHostShowsNoSecret: a Host printed or marshalled (a debug line, an error) shows
// none of the secret files' values.
func TestHostShowsNoSecret(t *testing.T) {
	const v = "tok_never_in_a_log_line"
	h := sandbox.Host{RunID: "R", SecretFiles: []sandbox.SecretFile{{Name: "TOKEN", Value: secret.New(v)}}}
	for _, verb := range []string{"%v", "%+v", "%#v"} {
		if out := fmt.Sprintf(verb, h); strings.Contains(out, v) || !strings.Contains(out, "TOKEN") {
			t.Errorf("Sprintf(%s) = %s", verb, out)
		}
	}
	// The secret files themselves (a Host, with its function fields, never marshals).
	if out, err := json.Marshal(h.SecretFiles); err == nil || strings.Contains(string(out), v) {
		t.Errorf("json.Marshal(Host.SecretFiles) = %s, %v; want an error", out, err)
	}
	if h.SecretFiles[0].Value.Reveal() != v {
		t.Error("Reveal lost the value")
	}
}
