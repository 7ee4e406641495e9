package creds

import "github.com/cordonhq/cordon/internal/linux"

func processStart(pid int) uint64 { return linux.ProcessStart(pid) }

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
