//go:build linux && noengines

package cli

import (
	"context"

	"github.com/cordonhq/cordon/internal/errdefs"
)

// serve and serveToken are cordon-engines' (delegated hands `serve` over before any
// command runs); reached only when cordon-engines could not be run.
func serve(context.Context, IO, string, bool, string) error { return serveMissing() }

func serveToken(IO) error { return serveMissing() }

func serveMissing() error {
	return errdefs.CannotRun(execEngines())
}
