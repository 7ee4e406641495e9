package cli

import (
	"github.com/spf13/cobra"

	"github.com/cordonhq/cordon/internal/errdefs"
)

// newInternalCmd holds the re-executed helpers (internal use only, hidden):
// `internal supervise` keeps a session open, `internal man DIR` writes the man pages
// and `internal seccomp-profile` prints the seccomp profile of the kubernetes
// placement's Pods. `internal init` (cordon's process 1 inside a sandbox) and the
// helpers it re-executes run before any command tree is built ([runInternal]).
func newInternalCmd(stdio IO) *cobra.Command {
	c := &cobra.Command{
		Use:    "internal",
		Short:  "internal use only",
		Hidden: true,
		Args:   cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			return errdefs.Usagef("internal: for cordon's own use only")
		},
	}
	c.AddCommand(newSuperviseCmd(stdio), newManCmd(stdio), newSeccompProfileCmd(stdio))
	return c
}
