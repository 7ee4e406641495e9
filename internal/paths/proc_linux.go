package paths

import "github.com/cordonhq/cordon/internal/linux"

// onProc reports whether p is on a proc file system, wherever it is mounted: its
// links (a process's root, cwd, descriptors) lead into other processes' namespaces,
// whatever they read as, so no chain through it can be checked by its names.
func onProc(p string) bool {
	fs, err := linux.KernelFilesystem(p)
	return err == nil && fs == "proc"
}
