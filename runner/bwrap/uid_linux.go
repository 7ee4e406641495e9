package bwrap

import (
	"os"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/linux"
)

// HostUID implements sandbox.Backend.HostUID. Run by another user, the sandbox is that user
// (bwrap maps nothing else). Run by root, it is the workspace owner, unless root owns
// the workspace: then it is a host uid of the run's own, leased by the runner, so
// that the sandbox is never host root and shares no per-uid kernel limit with
// another run.
func (b *Backend) HostUID(plan *contract.Plan) (uid int, lease bool, err error) {
	if os.Geteuid() != 0 {
		return os.Geteuid(), false, nil
	}
	uid, _, err = linux.Owner(plan.Workspace)
	if err != nil {
		return 0, false, errdefs.Unavailablef("%w", err)
	}
	return uid, uid == 0, nil
}

// sandboxIDs is the host uid and gid the sandbox runs as ([Backend.HostUID]); leased is
// the uid the runner leased for it (sandbox.Host.UID), which is its uid and gid when
// root owns the workspace. A sandbox that needs a leased uid and has none is refused:
// it never falls back to a uid another run may have.
func sandboxIDs(plan *contract.Plan, leased int) (uid, gid int, err error) {
	if os.Geteuid() != 0 {
		return os.Geteuid(), os.Getegid(), nil
	}
	uid, gid, err = linux.Owner(plan.Workspace)
	if err != nil {
		return 0, 0, errdefs.Unavailablef("%w", err)
	}
	if uid != 0 {
		return uid, gid, nil
	}
	if leased <= 0 {
		return 0, 0, errdefs.Unavailablef("bwrap: root owns the workspace %s and no host uid was leased for the sandbox (cordon never runs it as root, nor as a uid another run may share)", plan.Workspace)
	}
	return leased, leased, nil
}
