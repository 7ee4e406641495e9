package seatbelt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// sandboxExec is sandbox-exec's fixed path: never looked up on PATH, which the caller
// controls.
const sandboxExec = "/usr/bin/sandbox-exec"

// Check implements sandbox.Backend. The profile is generated and sandbox-exec exists,
// but the run-time half (egress proxy on a loopback port, credentials, sessions, the
// audit log's process tree) is not wired: refusing is what the design asks of a backend
// that cannot keep the contract's promises.
func (b *Backend) Check(ctx context.Context) error {
	if _, err := os.Stat(sandboxExec); err != nil {
		return errdefs.Unavailablef("seatbelt: %w", err)
	}
	return errdefs.Unsupportedf("seatbelt: the profile is generated (cordon explain --backend seatbelt) but running it is not built yet")
}

// Start implements sandbox.Backend; see Check.
func (b *Backend) Start(ctx context.Context, plan *contract.Plan, host sandbox.Host) (sandbox.Sandbox, error) {
	return nil, b.Check(ctx)
}

// execProfile runs argv under profile with sandbox-exec, in a process group of its own
// with env as its whole environment, and returns its exit status (128+n for signal n).
// When ctx ends first the whole group is killed (sandbox-exec execs the command, so the
// group is the command's) and ctx.Err() returned. macOS has no PDEATHSIG: a cordon that
// is killed leaves the group behind, which the runner's supervisor (not built) reaps.
func execProfile(ctx context.Context, profile string, argv []string, dir string, env []string, stdout, stderr io.Writer) (int, error) {
	if len(argv) == 0 {
		return -1, errors.New("seatbelt: empty command")
	}
	cmd := exec.Command(sandboxExec, append([]string{"-p", profile, "--"}, argv...)...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return -1, fmt.Errorf("seatbelt: starting sandbox-exec: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return exitStatus(cmd, err)
	case <-ctx.Done():
		_ = linux.KillGroup(cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return -1, ctx.Err()
	}
}

func exitStatus(cmd *exec.Cmd, err error) (int, error) {
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return -1, fmt.Errorf("seatbelt: waiting for sandbox-exec: %w", err)
	}
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return 128 + int(ws.Signal()), nil
	}
	return ws.ExitStatus(), nil
}
