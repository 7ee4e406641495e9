package paths

import "golang.org/x/sys/unix"

// onProc reports whether p is on a proc file system, wherever it is mounted: its
// links (a process's root, cwd, descriptors) lead into other processes' namespaces,
// whatever they read as, so no chain through it can be checked by its names.
func onProc(p string) bool {
	var st unix.Statfs_t
	return unix.Statfs(p, &st) == nil && st.Type == unix.PROC_SUPER_MAGIC
}
