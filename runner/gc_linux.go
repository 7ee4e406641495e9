package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/uids"
)

// removeCgroup removes a crashed run's cgroups, killing anything still in them.
func removeCgroup(runID string) error { return linux.RemoveCgroup(runID) }

// idleCgroupGrace is how old an idle run cgroup must be before gc takes it: a run's
// cgroup is idle from when it is made until its sandbox enters it, which an engine
// starting a container under load may take a minute to do.
const idleCgroupGrace = 5 * time.Minute

// gcIdleCgroups removes this user's idle run cgroups whose run directory under root is
// gone: a teardown that found a process still exiting could not remove them. A live
// run's cgroup always has its run directory (made before, removed after), a cgroup
// with any process in it is never touched, and neither is a young one: a run under
// another run root (CORDON_RUN_ROOT) has no directory under root, and may be starting.
func gcIdleCgroups(root string) {
	for _, name := range linux.IdleCgroups(os.Geteuid(), time.Now().Add(-idleCgroupGrace)) {
		if audit.ValidateRunID(name) != nil {
			continue // not a run's (a containerd namespace's, say)
		}
		if _, err := os.Lstat(filepath.Join(root, name)); os.IsNotExist(err) {
			_ = linux.RemoveIdleCgroup(name)
		}
	}
}

// GCUIDs takes back, as root, the host uids leased to sandboxes whose cordon is gone
// and that run no process any more, of any run root (the leases are host-wide), and
// returns them. It is `cordon gc`'s, not every start's (which runs [GC]): it reads
// every lease, and an allocation that finds the range full takes back what it finds
// dead itself.
func GCUIDs() ([]int, error) {
	if os.Geteuid() != 0 {
		return nil, nil // only root's cordon leases uids
	}
	freed, err := (&uids.Pool{Dir: uids.DefaultDir}).Reclaim()
	if err != nil {
		return freed, fmt.Errorf("taking back sandbox uids: %w", err)
	}
	return freed, nil
}
