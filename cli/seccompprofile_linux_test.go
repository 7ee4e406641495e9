//go:build !noengines

package cli

import (
	"testing"

	"github.com/cordonhq/cordon/placement/kubernetes/podseccomp"
)

// `cordon internal seccomp-profile` prints the Pod's profile, byte for byte, and
// takes no argument.
func TestSeccompProfileCmd(t *testing.T) {
	want, err := podseccomp.Profile()
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, code := run(t, "internal", "seccomp-profile")
	if code != 0 || out != string(want) {
		t.Errorf("exit %d, stderr %q; stdout differs from podseccomp.Profile: %d bytes, want %d", code, errOut, len(out), len(want))
	}
	if _, _, code := run(t, "internal", "seccomp-profile", "x"); code != 2 {
		t.Errorf("with an argument: exit %d, want 2", code)
	}
}
