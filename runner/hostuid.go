package runner

import (
	"context"
	"os"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/uids"
)

// runUID is the host uid a run's sandbox runs as, when its backend says
// ([sandbox.Backend.HostUID]).
type runUID struct {
	host   int // the sandbox's host uid; 0 when the backend does not say
	leased int // host, when it is leased to this run from cordon's range; else 0
}

// leaseUID finds the host uid the run's sandbox runs as and, when the backend needs
// one of the run's own, leases it from cordon's range (package uids) for the life of
// the run: released last, after the sandbox is gone. A run that cannot have one is
// refused (r.uidErr, returned by prepare once the log is open), never given a uid
// another live run holds.
func (r *run) leaseUID() {
	uid, lease, err := r.o.Backend.HostUID(r.plan)
	if err != nil || !lease {
		r.uid.host, r.uidErr = uid, err
		return
	}
	pool := r.o.uidPool
	if pool == nil {
		if pool, err = uids.Default(); err != nil {
			r.uidErr = errdefs.Invalidf("%w", err)
			return
		}
	}
	l, err := pool.Acquire(r.res.RunID)
	if err != nil {
		r.uidErr = errdefs.Unavailablef("no host uid for the sandbox: %w", err)
		return
	}
	r.undo.add("releasing the sandbox's host uid", func(context.Context) error { return l.Release() })
	r.uid = runUID{host: l.UID(), leased: l.UID()}
}

// PrefetchHostUID starts, when cordon runs as root (the only case that leases a uid),
// the scan of host processes that the run's lease makes (uids.Prefetch), so that it
// overlaps what the caller does before the run starts (loading the contract).
func PrefetchHostUID() {
	if os.Geteuid() != 0 {
		return
	}
	if r, err := uids.RangeFromEnv(); err == nil {
		uids.Prefetch(r)
	}
}
