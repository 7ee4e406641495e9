package creds

import (
	"os"
	"strconv"
	"strings"
)

// processStart returns a process's start time in clock ticks (field 22 of
// /proc/PID/stat), or 0 when the process does not exist.
func processStart(pid int) uint64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(data)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		s = s[i+1:]
	}
	f := strings.Fields(s)
	if len(f) < 20 {
		return 0
	}
	n, _ := strconv.ParseUint(f[19], 10, 64)
	return n
}

// alive reports whether the process that issued a grant still runs. The start time
// tells a reused pid apart; without one, any process with the pid counts as alive
// (when in doubt a grant is left to its ttl, never revoked under a live run).
func (o owner) alive() bool {
	if o.PID <= 0 {
		return false
	}
	start := processStart(o.PID)
	if o.Start == 0 {
		return start != 0
	}
	return start == o.Start
}
