//go:build !linux

package bwrap

import (
	"context"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// Check implements sandbox.Backend: Bubblewrap is Linux's.
func (b *Backend) Check(ctx context.Context) error {
	return errdefs.Unavailablef("bwrap: the bwrap backend is unimplemented on this GOOS")
}

// Start is unimplemented off Linux.
func (b *Backend) Start(ctx context.Context, plan *contract.Plan, host sandbox.Host) (sandbox.Sandbox, error) {
	return nil, b.Check(ctx)
}

// CanStage implements sandbox.Backend.CanStage: unimplemented on this GOOS.
func (b *Backend) CanStage() error { return b.Check(context.Background()) }

// HostUID implements sandbox.Backend.HostUID: unimplemented on this GOOS.
func (b *Backend) HostUID(plan *contract.Plan) (int, bool, error) {
	return 0, false, b.Check(context.Background())
}
