package sandbox

import "os"

// CommandCgroup is one command's cgroup, made by [NewCommandCgroup] (on Linux; there
// is none elsewhere). Kill may be called at any time, from any goroutine; the other
// methods are not safe for concurrent use.
type CommandCgroup struct {
	ID  uint64   // its cgroup v2 id, as the monitor reports it
	Dir *os.File // open directory, for CLONE_INTO_CGROUP
	cg  *cgroup
}
