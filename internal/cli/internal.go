package cli

import (
	"context"

	"github.com/cordonhq/cordon/internal/errdefs"

	"github.com/cordonhq/cordon/internal/pid1"
)

// internalCmd holds the re-executed helpers (internal use only): `internal init` is
// cordon's process 1 inside a sandbox.
func internalCmd(ctx context.Context, stdio IO, args []string) error {
	if len(args) > 0 && args[0] == "init" {
		return errdefs.Exit(pid1.Main())
	}
	if len(args) > 0 && args[0] == pid1.JoinArg {
		return errdefs.Exit(pid1.JoinMain(args[1:]))
	}
	if len(args) > 0 && args[0] == pid1.PostureArg {
		return errdefs.Exit(pid1.PostureMain(args[1:]))
	}
	if len(args) > 0 && args[0] == "supervise" {
		return superviseCmd(ctx, stdio, args[1:])
	}
	return errdefs.Usagef("internal: for cordon's own use only")
}
