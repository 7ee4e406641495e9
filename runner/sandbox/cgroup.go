package sandbox

import "os"

// CommandCgroups is implemented by sandboxes that can give each command of a session a
// cgroup of its own below the sandbox's: a timeout then kills everything the command
// started, setsid or not, and the monitor's events name the command exactly.
type CommandCgroups interface {
	// CommandCgroup creates the cgroup name; nil and no error when this sandbox has no
	// cgroup of its own to put it in.
	CommandCgroup(name string) (*CommandCgroup, error)
}

// CommandCgroup is one command's cgroup, made by [NewCommandCgroup] (on Linux; there
// is none elsewhere). Kill may be called at any time, from any goroutine; the other
// methods are not safe for concurrent use.
type CommandCgroup struct {
	ID  uint64   // its cgroup v2 id, as the monitor reports it
	Dir *os.File // open directory, for CLONE_INTO_CGROUP
	cg  *cgroup
}
