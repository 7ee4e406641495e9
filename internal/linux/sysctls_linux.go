package linux

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// NewSysctlTree returns a detached mount of the sys directory of a procfs of its own,
// read-only, nosuid, nodev and noexec: the kernel's sysctls, which answer for the
// namespaces of whoever reads them, on a file system instance no other mount shares
// (its inodes, their times included, are this one's), with nothing mounted below
// and no peer group to receive mounts from. The procfs is the caller's pid
// namespace's; only its sys directory is in the tree.
func NewSysctlTree() (*os.File, error) {
	fsfd, err := unix.Fsopen("proc", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("opening procfs: %w", err)
	}
	defer unix.Close(fsfd)
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return nil, fmt.Errorf("procfs: creating it: %w", err)
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return nil, fmt.Errorf("procfs: mounting: %w", err)
	}
	defer unix.Close(mfd)
	fd, err := unix.OpenTree(mfd, "sys", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("procfs: cloning its sys directory: %w", err)
	}
	return os.NewFile(uintptr(fd), "proc-sys"), nil
}
