package sandboxinit

import (
	"errors"
	"fmt"
	"os"

	"github.com/cordonhq/cordon/internal/ctl"
	"github.com/cordonhq/cordon/sandboxinit/wire"
)

// Main is the body of `cordon internal init` on macOS, where it is only a session's
// process 1 (a seatbelt run execs its command under sandbox-exec directly). The host
// starts it under sandbox-exec with the session's profile, which every command it
// forks inherits: the profile is the sandbox, so there is no Landlock, seccomp or mount
// check to make. It reads its Spec on fd 4, checks its uid, dials the control socket,
// reports on fd 3 and serves until the host hangs up.
func Main() int {
	status, specFile := os.NewFile(wire.StatusFD, "cordon-status"), os.NewFile(wire.SpecFD, "cordon-spec")
	if status == nil || specFile == nil {
		fmt.Fprintln(os.Stderr, "cordon: internal init must be started by cordon")
		return wire.ExitSelfCheck
	}
	spec, err := readSpec(specFile)
	switch {
	case err != nil:
	case !spec.Serve || spec.Control == nil:
		err = errors.New("on macOS process 1 only serves a session")
	case os.Getuid() != spec.HostUID:
		err = fmt.Errorf("running as uid %d, not the host's %d", os.Getuid(), spec.HostUID)
	}
	var c *ctl.Conn
	if err == nil {
		c, err = dialControl(spec.Control)
	}
	if !report(status, err, nil) {
		return wire.ExitSelfCheck
	}
	return serve(c, nil)
}

// JoinMain is Linux's (cgroups).
func JoinMain([]string) int { return wire.ExitNotExecutable }
