package linux

import (
	"os"
	"strconv"
	"strings"
)

// ProcessStart returns a process's start time in clock ticks since boot (field 22 of
// /proc/PID/stat), or 0 when there is no such process. A pid and its start time
// together name one process: pids are reused, start times tell the reuse apart. Run
// directories, containers and credential grants record both so that gc can tell a
// crashed owner from a live one. A zombie counts as gone.
func ProcessStart(pid int) uint64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(data)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		s = s[i+1:] // the command name may hold spaces and parentheses
	}
	f := strings.Fields(s)
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return 0 // a zombie has exited: only its parent has not reaped it yet
	}
	n, _ := strconv.ParseUint(f[19], 10, 64)
	return n
}
