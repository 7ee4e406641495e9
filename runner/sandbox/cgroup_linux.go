package sandbox

import (
	"os"
	"time"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/linux"
)

type cgroup = linux.Cgroup

// NewCommandCgroup creates the cgroup name below parent for one command of a session,
// for backends implementing [Sandbox.CommandCgroup]. owner, when not -1, is the uid that
// process 1 runs as, which must be able to write the new cgroup's cgroup.procs.
func NewCommandCgroup(parent *linux.Cgroup, name string, owner int) (*CommandCgroup, error) {
	c, err := parent.Child(name, owner)
	if err != nil {
		return nil, errdefs.Unavailablef("command cgroup: %w", err)
	}
	return &CommandCgroup{ID: c.ID, Dir: c.Dir(), cg: c}, nil
}

// Kill kills every process in the cgroup and waits (up to 5s) for them to be gone.
func (c *CommandCgroup) Kill() error { return c.cg.Kill(5 * time.Second) }

// Empty reports whether no process is left in the cgroup.
func (c *CommandCgroup) Empty() bool { return len(c.cg.Procs()) == 0 }

// Rmdir closes Dir and removes the cgroup when it is empty; it fails (EBUSY) otherwise.
func (c *CommandCgroup) Rmdir() error {
	c.Dir.Close()
	return os.Remove(c.cg.Path)
}

// Remove kills what is left in the cgroup, then removes it.
func (c *CommandCgroup) Remove() error { return c.cg.Remove() }
