package bwrap

import (
	"os"
	"strings"

	"github.com/cordonhq/cordon/internal/linux"
)

// procSysBare reports whether the host's /proc/sys can be bound read-only in the
// sandbox (Args' procSys) and bring nothing else along: /proc is a procfs and nothing
// is mounted below /proc/sys. bwrap's binds are recursive, so a file system mounted
// there (binfmt_misc, or systemd's automount point for it) would come into the sandbox
// too; then the bind is not made and process 1 walks /proc/sys as before. A mount
// made there after this look comes in read-only, and process 1's self-check, which
// then sees a mount below /proc/sys, walks it: the shortcut is taken only when the
// mount table proves it.
//
// Why the bind: bwrap as an unprivileged uid leaves the fresh procfs's /proc/sys as it
// is (not writable to the sandbox by ownership, but not a read-only mount either), so
// process 1 asked about every sysctl (~290 faccessat calls, the longest part of its
// self-check on every start). The sysctls are the same files in every procfs: the
// kernel's tables, answering for the namespaces of the process that reads them.
func procSysBare() bool {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	return procSysBareIn(linux.ParseMountinfo(string(data)))
}

// procSysBareIn is procSysBare for the mount table mounts.
func procSysBareIn(mounts []linux.MountInfo) bool {
	proc := false
	for _, m := range mounts {
		switch {
		case m.Point == "/proc":
			proc = m.FSType == "proc" // a later mount there covers an earlier one
		case strings.HasPrefix(m.Point, "/proc/sys/"):
			return false
		}
	}
	return proc
}
