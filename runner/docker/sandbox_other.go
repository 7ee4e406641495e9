//go:build !linux

package docker

import (
	"context"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// Start is unimplemented off Linux: the sandbox's process 1 is a Linux binary.
func (b *Backend) Start(ctx context.Context, plan *contract.Plan, host sandbox.Host) (sandbox.Sandbox, error) {
	return nil, errdefs.Unavailablef("docker: the docker backend is unimplemented on this GOOS")
}

// HostUID implements sandbox.Backend.HostUID: off Linux there is no sandbox, and no uid
// to lease for one.
func (b *Backend) HostUID(plan *contract.Plan) (int, bool, error) { return 0, false, nil }

// CanStage implements sandbox.Backend.CanStage: staged runs are Linux's.
func (b *Backend) CanStage() error { return sandbox.ErrNoStage }

// GC has nothing to collect off Linux.
func (b *Backend) GC(ctx context.Context) ([]string, error) { return nil, nil }
