package sandboxinit

import (
	"strings"

	"github.com/cordonhq/cordon/internal/linux"
)

// kernelFiles are the kernel's machine-wide controls that procfs exposes outside
// /proc/sys (which startSysctlWalk walks whole): writing any of them from a sandbox
// would reach the host. sysfs, cgroupfs and the other kernel-global file systems are
// refused whole when mounted read-write (checkMounts); probing their files here would
// read outside the Plan's readable set, which the monitor reports.
var kernelFiles = []string{
	"/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs", "/proc/acpi",
	"/proc/sys/fs/binfmt_misc/register", "/proc/kcore", "/proc/kmsg", "/proc/timer_list",
}

// kernelWritable lists the kernel interfaces this process could write: every file and
// directory below /proc/sys (sysctls, what [startSysctlWalk] returns; nil when the walk
// is not needed), and kernelFiles. An empty list is the only good answer. The engines
// mask some of these with /dev/null, which is writable and reaches nothing.
func kernelWritable(sysctls []string) []string {
	var out []string
	for _, p := range kernelFiles {
		if linux.Writable(p) && !linux.IsDevNull(p) {
			out = append(out, p)
		}
	}
	return append(out, sysctls...)
}

// startSysctlWalk walks /proc/sys in the background, but what namespaced passes over,
// for what this process may write ([linux.WritableBelow]: a faccessat per sysctl, by
// name relative to its directory); wait returns the list. Process 1 starts it as soon as
// the mount table says it is needed (not [procSysReadOnly]), beside the rest of the
// precheck: on the path of every start on bwrap it is the longest part.
func startSysctlWalk() (wait func() []string) {
	ch := make(chan []string, 1)
	go func() { ch <- linux.WritableBelow("/proc/sys", namespaced) }()
	return func() []string { return <-ch }
}

// sysctlsWritable is [startSysctlWalk] waited for.
func sysctlsWritable() []string { return startSysctlWalk()() }

// namespacedSysctls are the sysctls the kernel scopes to the sandbox's own network,
// IPC, UTS or user namespace: root of those namespaces may write them, and what it
// writes reaches nothing outside.
var namespacedSysctls = []string{
	"/proc/sys/net/", "/proc/sys/fs/mqueue/", "/proc/sys/user/",
	"/proc/sys/kernel/hostname", "/proc/sys/kernel/domainname",
	"/proc/sys/kernel/shm", "/proc/sys/kernel/msg", "/proc/sys/kernel/sem", "/proc/sys/kernel/auto_msgmni",
	"/proc/sys/kernel/ns_last_pid", "/proc/sys/kernel/pid_max", // the pid namespace's (6.14+)
}

// namespaced reports whether the sysctl (or directory of them) p is the sandbox's
// namespaces' own.
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
