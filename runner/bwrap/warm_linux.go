package bwrap

import (
	"os"
	"sync"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/handoff"
)

// warmed holds the idmap user namespaces [Backend.Warm] began, by plan, until Start takes
// one or its release drops it.
type warmed struct {
	mu sync.Mutex // mu guards m.
	m  map[*contract.Plan]*handoff.Userns
}

// Warm implements sandbox.Backend.Warm. As root, cordon stages the sandbox's sources
// through an idmap user namespace per owner (package handoff), and root owns the system's
// directories (and often the workspace): the namespace that shows root's files as the
// sandbox uid's is begun here, while the run's log, directory and proxy are prepared,
// instead of on the path of the start. Nothing else changes: the same namespace, made
// the same way, is used for the same sources. As another user nothing is staged, and
// nothing is begun.
func (b *Backend) Warm(plan *contract.Plan, leased int) (release func()) {
	if os.Geteuid() != 0 {
		return func() {}
	}
	uid, gid, err := sandboxIDs(plan, leased)
	if err != nil || uid == 0 {
		return func() {} // Start reports it
	}
	u := handoff.Prepare(handoff.Owner{UID: 0, GID: 0}, uid, gid)
	b.warm.mu.Lock()
	if b.warm.m == nil {
		b.warm.m = map[*contract.Plan]*handoff.Userns{}
	}
	old := b.warm.m[plan]
	b.warm.m[plan] = u
	b.warm.mu.Unlock()
	old.Close()
	return func() {
		if u := b.take(plan, u); u != nil {
			u.Close()
		}
	}
}

// take removes and returns what Warm began for plan (only want, when want is not nil),
// or nil.
func (b *Backend) take(plan *contract.Plan, want *handoff.Userns) *handoff.Userns {
	b.warm.mu.Lock()
	defer b.warm.mu.Unlock()
	u := b.warm.m[plan]
	if u == nil || want != nil && u != want {
		return nil
	}
	delete(b.warm.m, plan)
	return u
}
