package secret_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/secret"
)

// The thorough tests of printing, logging and marshalling are creds' (creds.Secret is
// this type); these check the type in the shapes the runner and the proxy hold it.
func TestValueInCarriers(t *testing.T) {
	const v = "s3cr3t-in-a-carrier"
	s := secret.New(v)
	type file struct {
		Name  string
		Value secret.Value
	}
	f := file{"TOKEN", s}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		if out := fmt.Sprintf(verb, []file{f}); strings.Contains(out, v) {
			t.Errorf("Sprintf(%s) = %s", verb, out)
		}
	}
	if _, err := json.Marshal(f); !errors.Is(err, secret.ErrMarshal) {
		t.Errorf("json.Marshal: %v; want ErrMarshal", err)
	}
	if s.Reveal() != v || s.IsZero() || !(secret.Value{}).IsZero() || (secret.Value{}).Reveal() != "" {
		t.Error("Reveal/IsZero")
	}
}
