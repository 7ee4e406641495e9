package sandboxinit

import (
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/cordonhq/cordon/internal/linux"
)

// kernelFiles are the kernel's machine-wide controls that procfs exposes outside
// /proc/sys (which kernelWritable walks whole): writing any of them from a sandbox
// would reach the host. sysfs, cgroupfs and the other kernel-global file systems are
// refused whole when mounted read-write (checkMounts); probing their files here would
// read outside the Plan's readable set, which the monitor reports.
var kernelFiles = []string{
	"/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs", "/proc/acpi",
	"/proc/sys/fs/binfmt_misc/register", "/proc/kcore", "/proc/kmsg", "/proc/timer_list",
}

// kernelWritable lists the kernel interfaces this process could write: every file and
// directory below /proc/sys, and kernelFiles. An empty list is the only good answer. The engines mask some of
// these with /dev/null, which is writable and reaches nothing.
//
// sysReadOnly says the mount table proved every path below /proc/sys unwritable (see
// [procSysReadOnly]); the walk, a faccessat per sysctl, is then skipped: on the path of
// every start it cost process 1 milliseconds, and its answer is known.
func kernelWritable(sysReadOnly bool) []string {
	var out []string
	for _, p := range kernelFiles {
		if linux.Writable(p) && !linux.IsDevNull(p) {
			out = append(out, p)
		}
	}
	if sysReadOnly {
		return out
	}
	_ = filepath.WalkDir("/proc/sys", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable: not listable, so not reachable by name either
		}
		if namespaced(p) {
			if d.IsDir() {
				// Everything below is the namespace's too: /proc/sys/net alone is four
				// fifths of the tree, and walking it cost process 1 milliseconds.
				return fs.SkipDir
			}
			return nil
		}
		if linux.Writable(p) {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// namespacedSysctls are the sysctls the kernel scopes to the sandbox's own network,
// IPC, UTS or user namespace: root of those namespaces may write them, and what it
// writes reaches nothing outside.
var namespacedSysctls = []string{
	"/proc/sys/net/", "/proc/sys/fs/mqueue/", "/proc/sys/user/",
	"/proc/sys/kernel/hostname", "/proc/sys/kernel/domainname",
	"/proc/sys/kernel/shm", "/proc/sys/kernel/msg", "/proc/sys/kernel/sem", "/proc/sys/kernel/auto_msgmni",
	"/proc/sys/kernel/ns_last_pid", "/proc/sys/kernel/pid_max", // the pid namespace's (6.14+)
}

func namespaced(p string) bool {
	for _, n := range namespacedSysctls {
		if strings.HasPrefix(p, n) {
			return true
		}
	}
	return false
}

// procSysReadOnly reports whether the mount table proves that nothing below /proc/sys
// can be written: procfs is mounted read-only at /proc/sys (bwrap and the engines' runc
// both do so) and nothing at all is mounted below it. /proc/sys holds only regular files
// and directories, and a write to either on a read-only mount fails with EROFS whatever
// the caller's uid or capabilities, which is what the walk would have found file by
// file. Any other shape (no such mount, a read-write one stacked at /proc/sys, a bind
// below it, which could be a device node that a read-only mount does not protect) is
// answered by the walk.
//
// at is the ID of the mount a lookup of /proc/sys reaches ([linux.MountID]; -1 when
// unknown): the table lists hidden mounts too, and a read-only /proc/sys under a
// /proc (or /) mounted after it over its parent proves nothing about the /proc/sys
// that paths reach. That mount must be one of the read-only procfs ones at /proc/sys.
func procSysReadOnly(mounts []linux.MountInfo, at int) bool {
	const sys = "/proc/sys"
	found := false
	for _, m := range mounts {
		switch {
		case m.Point == sys:
			if m.FSType != "proc" || !m.ReadOnly() {
				return false
			}
			found = found || m.ID == at
		case strings.HasPrefix(m.Point, sys+"/"):
			return false
		}
	}
	return found
}

// procSysMount is the ID of the mount /proc/sys is on, or -1.
func procSysMount() int {
	id, err := linux.MountID("/proc/sys")
	if err != nil {
		return -1
	}
	return id
}
