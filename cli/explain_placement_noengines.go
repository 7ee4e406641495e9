//go:build linux && noengines

package cli

import (
	"io"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
)

// explainKubernetes is cordon-engines' (explain is delegated to it, and this build
// links no Kubernetes package); reached only when cordon-engines could not be run.
func explainKubernetes(io.Writer, *contract.Plan, string) error {
	return errdefs.CannotRun(execEngines())
}
