package seatbelt

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/runner/sandbox"
	"github.com/cordonhq/cordon/sandboxinit/wire"
)

// serve runs a session's process 1 (`cordon internal init`) under the profile until
// it exits: its spec on fd 4 names the control socket and the token, its report comes
// back on fd 3. It runs in a process group of its own, like a run's command, but with
// no group watcher: the control connection is its lifeline. When cordon ends, however
// it ends, the kernel closes cordon's end, process 1 reads EOF and kills the process
// groups of its commands before it exits (a watcher killing process 1 first would leave
// those groups behind).
func (s *instance) serve(ctx context.Context, p sandbox.Process, dir string) (int, error) {
	if s.host.ControlSocket == "" || s.host.Init == "" {
		return -1, errdefs.Invalidf("seatbelt: a session needs a control socket and cordon's binary")
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return -1, errdefs.Unavailablef("seatbelt: %w", err)
	}
	defer statusR.Close()
	specR, specW, err := os.Pipe()
	if err != nil {
		statusW.Close()
		return -1, errdefs.Unavailablef("seatbelt: %w", err)
	}
	defer specW.Close()
	cmd := exec.Command(sandboxExec, "-p", s.profile.SBPL, "--", s.host.Init, "internal", "init")
	cmd.Dir, cmd.Env = dir, s.env
	cmd.Stdout, cmd.Stderr = p.Stdout, p.Stderr
	cmd.ExtraFiles = []*os.File{statusW, specR} // fds 3 and 4: wire.StatusFD, wire.SpecFD
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	statusW.Close()
	specR.Close()
	if err != nil {
		return -1, errdefs.Unavailablef("seatbelt: starting sandbox-exec: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	spec, _ := json.Marshal(wire.Spec{
		Dir:     dir,
		HostUID: os.Getuid(),
		Serve:   true,
		Control: &wire.Control{Socket: s.host.ControlSocket, Token: s.host.ControlToken},
	})
	if _, err := specW.Write(spec); err != nil && !errors.Is(err, syscall.EPIPE) {
		_ = linux.KillGroup(cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return -1, errdefs.Unavailablef("seatbelt: sending process 1 its spec: %w", err)
	}
	specW.Close()
	st, checked := readStatus(statusR)
	var werr error
	select {
	case werr = <-done:
	case <-ctx.Done():
		_ = linux.KillGroup(cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return -1, ctx.Err()
	}
	if checked && !st.OK {
		return -1, fmt.Errorf("%w: seatbelt: the session's process 1: %s", errdefs.ErrSandbox, st.Error)
	}
	return exitStatus(werr)
}

// readStatus reads process 1's report; checked is false when it never wrote one
// (sandbox-exec refused the profile, or cordon's binary could not run).
func readStatus(r *os.File) (wire.Status, bool) {
	var st wire.Status
	line, err := bufio.NewReader(r).ReadBytes('\n')
	if err != nil || json.Unmarshal(line, &st) != nil {
		return wire.Status{}, false
	}
	return st, true
}
