package runner

import "github.com/cordonhq/cordon/internal/linux"

// removeCgroup removes a crashed run's cgroups, killing anything still in them.
func removeCgroup(runID string) error { return linux.RemoveCgroup(runID) }
