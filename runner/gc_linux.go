package runner

import (
	"os"
	"path/filepath"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/linux"
)

// removeCgroup removes a crashed run's cgroups, killing anything still in them.
func removeCgroup(runID string) error { return linux.RemoveCgroup(runID) }

// gcIdleCgroups removes this user's idle run cgroups whose run directory under root is
// gone: a teardown that found a process still exiting could not remove them. A live
// run's cgroup always has its run directory (made before, removed after), and a
// cgroup with any process in it is never touched.
func gcIdleCgroups(root string) {
	for _, name := range linux.IdleCgroups(os.Geteuid()) {
		if audit.ValidateRunID(name) != nil {
			continue // not a run's (a containerd namespace's, say)
		}
		if _, err := os.Lstat(filepath.Join(root, name)); os.IsNotExist(err) {
			_ = linux.RemoveIdleCgroup(name)
		}
	}
}
