// Package owner names the cordon process that owns something it left on the host (a run
// directory, a credential grant, a session, a container) in a form that survives pid
// reuse, and answers the one question gc and the session client ask of it: does that
// process still run? Every record of an owner uses this type, so the answer is the same
// everywhere.
package owner

import (
	"strconv"
	"strings"
)

// Process is one process, told apart from a later one with the same pid by its start
// time (clock ticks since boot; 0 where the platform does not say) and its pid namespace
// ("" where unknown).
type Process struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start,omitempty"`
	PIDNS string `json:"pidns,omitempty"`
}

// Self is this process.
func Self() Process {
	pid := processID()
	return Process{PID: pid, Start: startOf(pid), PIDNS: pidNamespace()}
}

// Alive reports whether p still runs. One recorded without a start time counts as
// alive while its pid exists. One recorded in another pid namespace (a cordon in a
// container sharing /run/cordon or the engine) is looked for among the processes this
// one can see, by that namespace and its pid there: found, it is alive while its start
// time matches; not found, it is gone only when this process sees every process on
// the host (root, in the host's pid namespace, with the host's /proc), for then no
// process is left in its namespace with its pid. Anywhere else, an owner it cannot
// find counts as alive. When in doubt an owner is alive: what it owns is left to it (or
// to its ttl), never taken from under a live run.
func (p Process) Alive() bool {
	switch {
	case p.PID <= 0:
		return false
	case p.PIDNS != "" && p.PIDNS != pidNamespace():
		return aliveElsewhere(p, seesEveryProcess())
	case p.Start == 0:
		return exists(p.PID)
	}
	switch s := startOf(p.PID); {
	case s == p.Start:
		return true
	case s == 0:
		return false
	}
	// Another start time: a later process with p's pid, unless the two count time
	// differently after all (a time namespace whose offset could not be read).
	return !sameClockOf(p.PID)
}

// Label is p as one string, "PID:START:PIDNS", for a container label.
func (p Process) Label() string {
	return strconv.Itoa(p.PID) + ":" + strconv.FormatUint(p.Start, 10) + ":" + p.PIDNS
}

// ParseLabel reads a [Process.Label]; ok is false for anything else.
func ParseLabel(s string) (p Process, ok bool) {
	f := strings.Split(s, ":")
	if len(f) != 3 {
		return Process{}, false
	}
	pid, err1 := strconv.Atoi(f[0])
	start, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil || pid <= 0 {
		return Process{}, false
	}
	return Process{PID: pid, Start: start, PIDNS: f[2]}, true
}
