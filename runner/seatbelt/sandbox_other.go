//go:build !darwin

package seatbelt

import (
	"context"
	"runtime"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// Check implements sandbox.Backend: Seatbelt is macOS's.
func (b *Backend) Check(ctx context.Context) error {
	return errdefs.Unavailablef("macOS only: sandbox-exec is not on %s", runtime.GOOS)
}

// LoopbackEgress implements sandbox.Backend.LoopbackEgress: there is no seatbelt
// sandbox on this GOOS (Check refuses the run first).
func (b *Backend) LoopbackEgress() bool { return false }

// Start implements sandbox.Backend; it is unimplemented on this GOOS.
func (b *Backend) Start(ctx context.Context, plan *contract.Plan, host sandbox.Host) (sandbox.Sandbox, error) {
	return nil, b.Check(ctx)
}
