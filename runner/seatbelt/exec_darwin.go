package seatbelt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/groupwatch"
	"github.com/cordonhq/cordon/internal/linux"
)

// stdio is a command's standard streams.
type stdio struct {
	in       io.Reader
	out, err io.Writer
}

// execProfile runs argv under profile with sandbox-exec, in a process group of its own
// with env as its whole environment, and returns its exit status (128+n for signal n).
// sandbox-exec execs the command, so the group is the command's.
//
// The group ends with the command: when ctx ends first, or when the command exits and
// left processes behind, the whole group is killed. macOS has no PDEATHSIG: a watcher
// (package groupwatch, started from watcher, cordon's own binary) kills the group if
// cordon dies first. watcher "" runs without one (the tests of the profile).
func execProfile(ctx context.Context, watcher, profile string, argv []string, dir string, env []string, std stdio) (int, error) {
	if len(argv) == 0 {
		return -1, errors.New("seatbelt: empty command")
	}
	cmd := exec.Command(sandboxExec, append([]string{"-p", profile, "--"}, argv...)...)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	copies, err := connect(cmd, std)
	if err != nil {
		return -1, err
	}
	defer copies.wait()
	err = cmd.Start()
	copies.started()
	if err != nil {
		return -1, fmt.Errorf("seatbelt: starting sandbox-exec: %w", err)
	}
	pgid := cmd.Process.Pid
	var w *groupwatch.Watcher
	if watcher != "" {
		if w, err = groupwatch.Start(watcher, pgid); err != nil {
			_ = linux.KillGroup(pgid, syscall.SIGKILL)
			_ = cmd.Wait()
			return -1, fmt.Errorf("seatbelt: %w", err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var werr error
	exited := false
	select {
	case werr = <-done:
		exited = true
	case <-ctx.Done():
	}
	// Whatever is left of the group goes: what a command started does not outlive it
	// (ESRCH when nothing is left).
	_ = linux.KillGroup(pgid, syscall.SIGKILL)
	if !exited {
		werr = <-done
	}
	if w != nil {
		if err := w.Release(); err != nil {
			return -1, fmt.Errorf("seatbelt: %w", err)
		}
	}
	if ctx.Err() != nil {
		return -1, ctx.Err()
	}
	return exitStatus(werr)
}

// copies are the goroutines copying a command's streams through pipes, so that Wait
// returns when the command exits even if processes it left behind hold its output
// (they are killed next, which ends the copies).
type copies struct {
	child   []*os.File // the sandbox's ends, closed once it has started
	readers []*os.File // cordon's ends of the output pipes
	wg      sync.WaitGroup
}

// connect gives cmd std, through pipes for what is not a file.
func connect(cmd *exec.Cmd, std stdio) (*copies, error) {
	c := &copies{}
	var err error
	cmd.Stdin, err = c.input(std.in)
	if err == nil {
		cmd.Stdout, err = c.output(std.out)
	}
	if err == nil {
		cmd.Stderr, err = c.output(std.err)
	}
	if err != nil {
		c.started()
		return nil, fmt.Errorf("seatbelt: %w", err)
	}
	return c, nil
}

func (c *copies) input(r io.Reader) (io.Reader, error) {
	if _, ok := r.(*os.File); ok || r == nil {
		return r, nil
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	c.child = append(c.child, pr)
	// Not waited for: a reader that never ends must not hold up the command's end.
	go func() {
		_, _ = io.Copy(pw, r)
		pw.Close()
	}()
	return pr, nil
}

func (c *copies) output(w io.Writer) (io.Writer, error) {
	if _, ok := w.(*os.File); ok || w == nil {
		return w, nil
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	c.child, c.readers = append(c.child, pw), append(c.readers, pr)
	c.wg.Go(func() {
		_, _ = io.Copy(w, pr)
		pr.Close()
	})
	return pw, nil
}

// started closes the sandbox's ends of the pipes in cordon.
func (c *copies) started() {
	for _, f := range c.child {
		f.Close()
	}
}

// wait waits for the output copies to reach EOF, which they do once the group is dead.
// A process that left the group (setsid) and holds the output is not waited for past
// drainTimeout: its output is cut.
func (c *copies) wait() {
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(drainTimeout):
		for _, r := range c.readers {
			r.Close()
		}
		<-done
	}
}

// drainTimeout bounds the wait for a command's output after its group was killed.
const drainTimeout = 5 * time.Second

func exitStatus(err error) (int, error) {
	code, ok := errdefs.ProcessCode(err)
	if !ok {
		return -1, fmt.Errorf("seatbelt: waiting for sandbox-exec: %w", err)
	}
	return code, nil
}
