//go:build linux && noengines

package cli

import (
	"context"

	"github.com/cordonhq/cordon/internal/errdefs"
)

// serveMCP is cordon-engines' (delegated hands `mcp` over before any command runs):
// the MCP SDK, and what its packages cost every start of cordon, stay out of the
// cordon binary. Reached only when cordon-engines could not be run.
func serveMCP(context.Context, IO, sessionStartOptions) error {
	return errdefs.CannotRun(execEngines())
}
