package linux

import (
	"os"

	"golang.org/x/sys/unix"
)

// OpenCgroupProcs opens cgroup.procs of the cgroup directory open as dirfd, for
// writing and close-on-exec: a process that writes to it ([JoinCgroupProcs]) moves
// into that cgroup.
func OpenCgroupProcs(dirfd int) (*os.File, error) {
	fd, err := unix.Openat(dirfd, "cgroup.procs", unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), "cgroup.procs"), nil
}

// JoinCgroupProcs moves the calling process into the cgroup whose cgroup.procs is
// open for writing as the raw descriptor fd ("0": the writing process).
func JoinCgroupProcs(fd int) error {
	_, err := unix.Write(fd, []byte("0"))
	return err
}
