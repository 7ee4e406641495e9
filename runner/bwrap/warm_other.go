//go:build !linux

package bwrap

import "github.com/cordonhq/cordon/contract"

// warmed is Linux's (warm_linux.go): nothing is begun elsewhere.
type warmed struct{}

// Warm implements sandbox.Backend.Warm: nothing is begun off Linux.
func (b *Backend) Warm(plan *contract.Plan, leased int) (release func()) { return nil }
