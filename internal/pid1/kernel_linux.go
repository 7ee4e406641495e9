package pid1

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
func kernelWritable() []string {
	var out []string
	for _, p := range kernelFiles {
		if linux.Writable(p) && !linux.IsDevNull(p) {
			out = append(out, p)
		}
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
