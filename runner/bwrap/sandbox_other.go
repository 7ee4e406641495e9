//go:build !linux

package bwrap

import (
	"context"
	"fmt"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// Check implements sandbox.Backend: Bubblewrap is Linux's.
func (b *Backend) Check(ctx context.Context) error {
	return fmt.Errorf("%w: bwrap: the bwrap backend is unimplemented on this GOOS", errdefs.ErrUnavailable)
}

// Start is unimplemented off Linux.
func (b *Backend) Start(ctx context.Context, plan *contract.Plan, host sandbox.Host) (sandbox.Sandbox, error) {
	return nil, b.Check(ctx)
}
