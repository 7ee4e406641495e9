package owner

import (
	"os"
	"strings"

	"github.com/cordonhq/cordon/internal/linux"
)

func processID() int { return os.Getpid() }

// startOf is pid's start time, 0 when it is gone (or a zombie).
func startOf(pid int) uint64 { return linux.ProcessStart(pid) }

// exists reports whether a process with pid runs.
func exists(pid int) bool { return linux.ProcessStart(pid) != 0 }

// pidNamespace names this process's pid namespace ("4026531836"), or "".
func pidNamespace() string {
	link, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(strings.TrimPrefix(link, "pid:["), "]")
}
