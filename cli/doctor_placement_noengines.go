//go:build linux && noengines

package cli

import (
	"context"

	"github.com/cordonhq/cordon/internal/errdefs"
)

// doctorPlacement is cordon-engines' (this build links no Kubernetes client);
// reached only when cordon-engines could not be run.
func doctorPlacement(context.Context, IO, doctorOptions) error {
	return errdefs.CannotRun(execEngines())
}
