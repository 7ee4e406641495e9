package sandboxinit

import (
	"errors"
	"os"
	"syscall"

	"github.com/cordonhq/cordon/internal/ctl"
	"github.com/cordonhq/cordon/internal/linux"
)

// On macOS process 1 is no pid namespace's init and XNU has no subreaper: a process
// whose parent exits is reparented to launchd, not to process 1, which reaps only the
// commands' first processes. What it can still reach are the process groups it made,
// one per command: those are the boundary of what a session's stop kills. A process
// that leaves its group (setsid, setpgid) escapes it, as it escapes a seatbelt run's
// group kill.

// confiner is Linux's Landlock and seccomp; on macOS the Seatbelt profile process 1
// runs under is inherited by every command, and there is nothing more to apply.
type confiner struct{}

// left are the process groups of commands whose first process exited but which may
// still have members (background processes), killed when the session stops. Guarded
// by server.mu.
var left = map[int]struct{}{}

// exited keeps pgid's group for the stop, and forgets groups found empty: a pgid is not
// reused while its group has members, so only an empty one could be taken by another
// process group later.
func (s *server) exited(pgid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	left[pgid] = struct{}{}
	sweep()
}

// sweep forgets every group in left that has no member. s.mu is held.
func sweep() {
	for pgid := range left {
		if errors.Is(linux.KillGroup(pgid, 0), syscall.ESRCH) {
			delete(left, pgid)
		}
	}
}

// stopAll kills every group a command made that still has members: the running
// commands' and what finished ones left behind.
func (s *server) stopAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	sweep()
	for _, pgid := range s.groups {
		left[pgid] = struct{}{}
	}
	for pgid := range left {
		_ = linux.KillGroup(pgid, syscall.SIGKILL)
	}
}

// fork starts the command in its own process group. macOS has no cgroups: a request
// with more than three descriptors (Linux's cgroup directory) is run without them.
func (s *server) fork(m ctl.Msg, path string, files []*os.File) (int, error) {
	attr := commandAttr(m, files)
	s.mu.Lock()
	defer s.mu.Unlock()
	sweep()
	pid, err := linux.ForkExec(path, m.Argv, attr)
	if err == nil {
		s.running[pid], s.groups[m.ID] = m.ID, pid
	}
	return pid, err
}
