//go:build linux && !noengines

package cli

import (
	"testing"

	"github.com/cordonhq/cordon/runner/bwrap"
	"github.com/cordonhq/cordon/runner/container"
)

// TestPostureBinary: doctor runs the init binary at the path every backend mounts it.
func TestPostureBinary(t *testing.T) {
	for name, p := range map[string]string{"bwrap": bwrap.InitPath, "container": container.InitPath} {
		if p != postureBinary {
			t.Errorf("%s mounts cordon at %q; doctor runs %q", name, p, postureBinary)
		}
	}
}
