package runner

import (
	"path/filepath"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/linux"
)

// checkKernelFilesystems refuses a plan whose workspace or writable grant is on one of
// the kernel's own file systems (/proc, /sys, a cgroup hierarchy, bpffs...): the
// sandbox would write kernel interfaces of the host, and the run's placeholders (an
// empty .git is a mkdir) would be made there before process 1's own check refused it.
func checkKernelFilesystems(plan *contract.Plan) error {
	for _, m := range plan.Mounts {
		if m.Type != contract.Bind || m.Access != contract.ReadWrite {
			continue
		}
		dir := m.Path
		if rd, err := resolveExistingPrefix(dir); err == nil {
			dir = rd
		}
		// A path that does not exist yet would be made on its nearest existing
		// ancestor's file system.
		name, err := linux.KernelFilesystem(dir)
		for err != nil && dir != "/" && dir != "." {
			dir = filepath.Dir(dir)
			name, err = linux.KernelFilesystem(dir)
		}
		if name == "" {
			continue
		}
		what := "a writable grant"
		if m.Path == plan.Workspace {
			what = "the workspace"
		}
		return errdefs.Invalidf("%s %s is on %s, a kernel file system: its files are the host kernel's interfaces, which no sandbox may write; run from an ordinary directory", what, m.Path, name)
	}
	return nil
}
