package runner

import (
	"context"
	"fmt"
	"sync"

	"github.com/cordonhq/cordon/internal/trace"
)

// cleanups is a run's undo list. Each resource registers how to release it the moment it
// is acquired, and release undoes them in reverse order of acquisition, every one of them
// whatever the others return (gVisor's pkg/cleanup, containerd's cleanup.Do). Teardown
// order is therefore the reverse of setup by construction, and a resource that was never
// acquired has nothing to undo. Safe for concurrent use; release is idempotent.
type cleanups struct {
	mu    sync.Mutex // mu guards steps.
	steps []cleanupStep
}

type cleanupStep struct {
	what string // says what failed: "stopping egress proxy"
	undo func(context.Context) error
}

// add registers undo, described by what, to run before everything registered earlier.
func (c *cleanups) add(what string, undo func(context.Context) error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.steps = append(c.steps, cleanupStep{what, undo})
}

// release runs every registered step, last first, and returns what failed, each error
// naming its step. Steps added while it runs are run too; a second call does nothing.
func (c *cleanups) release(ctx context.Context) []error {
	var errs []error
	for {
		c.mu.Lock()
		n := len(c.steps)
		if n == 0 {
			c.mu.Unlock()
			return errs
		}
		s := c.steps[n-1]
		c.steps = c.steps[:n-1]
		c.mu.Unlock()
		var sp trace.Span
		if trace.Enabled() {
			sp = trace.Begin("undo." + s.what)
		}
		err := s.undo(ctx)
		sp.End()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.what, err))
		}
	}
}
