//go:build !linux

package monitor

import (
	"context"
	"runtime"

	"github.com/cordonhq/cordon/internal/errdefs"
)

// Monitor is a running monitor; on this GOOS none can start.
type Monitor struct{}

// Start fails: the monitor needs Linux (eBPF).
func Start(ctx context.Context, opts Options) (*Monitor, error) {
	return nil, errdefs.Unavailablef("monitor: unimplemented on %s (needs Linux eBPF)", runtime.GOOS)
}

// Stats returns zero counters.
func (m *Monitor) Stats() Stats { return Stats{} }

// Close does nothing.
func (m *Monitor) Close() error { return nil }

// GC does nothing: no program is pinned on this GOOS.
func GC(ctx context.Context) (Collected, error) { return Collected{}, nil }

// closedChan is a channel closed from the start.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Released is closed: there is nothing to release.
func (m *Monitor) Released() <-chan struct{} { return closedChan }

// ReleaseErr is nil.
func (m *Monitor) ReleaseErr() error { return nil }
