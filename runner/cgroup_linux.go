package runner

import (
	"os"
	"time"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/linux"
)

// NewCommandCgroup creates the cgroup name below parent for one command of a session,
// for backends implementing [CommandCgroups]. owner, when not -1, is the uid that
// process 1 runs as, which must be able to write the new cgroup's cgroup.procs.
func NewCommandCgroup(parent *linux.Cgroup, name string, owner int) (*CommandCgroup, error) {
	c, err := parent.Child(name, owner)
	if err != nil {
		return nil, errdefs.Unavailablef("command cgroup: %w", err)
	}
	return &CommandCgroup{
		ID: c.ID, Dir: c.Dir(),
		Kill:  func() error { return c.Kill(5 * time.Second) },
		Empty: func() bool { return len(c.Procs()) == 0 },
		Rmdir: func() error {
			c.Dir().Close()
			return os.Remove(c.Path)
		},
		Remove: c.Remove,
	}, nil
}
