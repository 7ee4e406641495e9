package sandboxinit

import (
	"os"

	"github.com/cordonhq/cordon/internal/ctl"
	"github.com/cordonhq/cordon/internal/linux"
)

// killSandbox kills every other process of the sandbox. As process 1 of its pid
// namespace, kill(-1) reaches exactly those; anywhere else it would reach every process
// of the caller's user on the host: never. A Pod's inner init is not process 1, so
// there it does nothing, and process 1 kills the rest when the inner init exits
// (podnetns_linux.go).
func killSandbox() { _ = linux.KillNamespace() }

// stopAll kills what is left of the sandbox when the session ends.
func (s *server) stopAll() { killSandbox() }

// exited is told of a command whose first process exited: on Linux what it left stays
// until the session stops, in the pid namespace process 1 reaps and kills.
func (s *server) exited(int) {}

// fork starts the command, confined, in its own process group and, with a fourth
// descriptor, in its own cgroup (see [confiner.start]).
func (s *server) fork(m ctl.Msg, path string, files []*os.File) (int, error) {
	attr := commandAttr(m, files)
	var procs *os.File
	switch {
	case len(files) == 5: // the host opened the cgroup's cgroup.procs too
		attr.Sys.UseCgroupFD, attr.Sys.CgroupFD = true, int(files[3].Fd())
		procs = files[4]
	case len(files) == 4:
		attr.Sys.UseCgroupFD, attr.Sys.CgroupFD = true, int(files[3].Fd())
		// Opened now, while this thread may still open anything: the trampoline that
		// joins it where clone3 is refused gets it as fd 3. Where this fails (a
		// bwrap sandbox's uid may not open what the host's directory holds, though
		// it may clone into it) only that fallback is lost.
		if f, err := linux.OpenCgroupProcs(int(files[3].Fd())); err == nil {
			procs = f
			defer procs.Close()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	pid, err := s.k.start(path, m.Argv, attr, procs)
	if err == nil {
		s.running[pid], s.groups[m.ID] = m.ID, pid
	}
	return pid, err
}
