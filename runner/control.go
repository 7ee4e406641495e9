package runner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/cordonhq/cordon/internal/ctl"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// outputGrace is how long a command's output may keep flowing after its first process
// exited: a background child that inherited stdout would otherwise hold the exec open.
const outputGrace = 250 * time.Millisecond

// control is the host end of a session's control channel: one connection from the
// sandbox's process 1, over which each exec is one request with its stdio pipes
// attached, answered by its exit.
type control struct {
	c  *ctl.Conn
	uc *net.UnixConn // c's socket, to hang up on one side only

	mu      sync.Mutex // mu guards next, waiting and err.
	next    uint64
	waiting map[uint64]chan ctl.Msg
	err     error         // why the channel is gone
	gone    chan struct{} // closed when the channel is gone
}

// newToken returns the secret process 1 presents on the control channel.
func newToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// listenControl listens on path (in the run directory) for process 1.
func listenControl(path string) (*net.UnixListener, error) {
	if len(path) > maxSocketPath {
		return nil, errdefs.Unavailablef("the run directory %s is too long a path for a unix socket (%d bytes, at most %d); use a shorter run root (CORDON_RUN_ROOT)", filepath.Dir(path), len(path), maxSocketPath)
	}
	ln, err := ctl.Listen(path)
	if err != nil {
		return nil, errdefs.Unavailablef("control socket: %w", err)
	}
	ln.SetUnlinkOnClose(true)
	return ln, nil
}

// acceptControl takes the first connection that presents token, then closes the
// listener, before answering it: process 1 dials before any command of the sandbox exists, so no other
// process can take its place, and none can dial later. take is given the descriptors
// the hello carried (the egress listener) and keeps or closes them; when it fails the
// connection is dropped unanswered and acceptControl fails with its error (process 1
// then runs nothing); otherwise process 1 is answered ready. Descriptors on any later
// message are closed unread ([control.read]). It gives up when sandboxDone closes
// (process 1 ended before dialling; nil for never) or ctx ends.
func acceptControl(ctx context.Context, ln *net.UnixListener, token string, sandboxDone <-chan struct{}, take func([]*os.File) error) (*control, error) {
	defer ln.Close()
	type accepted struct {
		c   *ctl.Conn
		uc  *net.UnixConn
		err error
	}
	ch := make(chan accepted, 1)
	go func() {
		for {
			uc, err := ln.AcceptUnix()
			if err != nil {
				ch <- accepted{err: err}
				return
			}
			c := ctl.New(uc)
			m, files, err := c.Recv()
			if err != nil || m.Op != ctl.OpHello || m.Token != token {
				ctl.CloseFiles(files)
				c.Close()
				continue
			}
			// Nobody dials after process 1: the listener is closed before the ready
			// that lets a command start, so a command's connect is refused, not queued
			// in the backlog until the deferred close (a staged run's command was seen
			// connecting there).
			ln.Close()
			// The outcome is sent before the connection closes: process 1 sees the
			// hang-up (and exits) only once the reason is there to be read.
			if err := take(files); err != nil {
				ch <- accepted{err: err}
				c.Close()
				return
			}
			if err := c.Send(ctl.Msg{Op: ctl.OpReady}); err != nil {
				ch <- accepted{err: errdefs.Unavailablef("answering the sandbox's process 1: %w", err)}
				c.Close()
				return
			}
			ch <- accepted{c: c, uc: uc}
			return
		}
	}()
	var a accepted
	select {
	case a = <-ch:
	case <-sandboxDone:
		select {
		case a = <-ch: // decided before process 1 ended (a refusal ends it): the reason
		default:
			return nil, fmt.Errorf("%w: the sandbox's process 1 ended before taking commands", errdefs.ErrSandbox)
		}
	case <-ctx.Done():
		select {
		case a = <-ch:
		default:
			return nil, ctx.Err()
		}
	}
	switch {
	case errors.Is(a.err, errListener) || errors.Is(a.err, errdefs.ErrUnavailable):
		return nil, a.err
	case a.err != nil:
		return nil, errdefs.Unavailablef("waiting for the sandbox's process 1: %w", a.err)
	}
	cc := &control{c: a.c, uc: a.uc, waiting: map[uint64]chan ctl.Msg{}, gone: make(chan struct{})}
	go cc.read()
	return cc, nil
}

// read dispatches exits to the waiting execs until the channel ends.
func (c *control) read() {
	var err error
	for {
		var m ctl.Msg
		var files []*os.File
		m, files, err = c.c.Recv()
		ctl.CloseFiles(files)
		if err != nil {
			break
		}
		if m.Op != ctl.OpExit {
			continue
		}
		c.mu.Lock()
		ch := c.waiting[m.ID]
		delete(c.waiting, m.ID)
		c.mu.Unlock()
		if ch != nil {
			ch <- m
		}
	}
	c.mu.Lock()
	c.err = errdefs.Unavailablef("the session's sandbox is gone (%w)", err)
	c.mu.Unlock()
	close(c.gone)
}

// close hangs up: process 1 kills everything in the sandbox and exits.
func (c *control) close() { c.c.Close() }

// hangup ends the channel from the host's side only, so that process 1's own end of
// it can be seen: process 1 reads end of file, kills everything in the sandbox, and
// exits, which closes its end. hangup reports whether that happened within grace; a
// process 1 that is stopped (SIGSTOP, a tracer) or hung does not, and the caller then
// kills the sandbox from outside. The channel is closed either way.
func (c *control) hangup(grace time.Duration) bool {
	defer c.close()
	if err := c.uc.CloseWrite(); err != nil {
		select {
		case <-c.gone:
			return true
		default:
			return false
		}
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-c.gone:
		return true
	case <-t.C:
		return false
	}
}

// exec runs p in the sandbox and returns its status (see Sandbox.Exec).
func (c *control) exec(ctx context.Context, p sandbox.Process) (int, error) {
	pipes, err := newStdio(p)
	if err != nil {
		return 0, errdefs.Unavailablef("%w", err)
	}
	defer pipes.close()
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return 0, c.err
	}
	c.next++
	id := c.next
	exited := make(chan ctl.Msg, 1)
	c.waiting[id] = exited
	c.mu.Unlock()
	fds := pipes.child
	if p.Cgroup != nil {
		fds = append(fds[:len(fds):len(fds)], p.Cgroup)
		// Its cgroup.procs, opened here, so that process 1 opens nothing of the host's
		// (its own open of a host path raised a monitor alert on every command). Where
		// this fails, process 1 opens it itself.
		if procs, err := linux.OpenCgroupProcs(int(p.Cgroup.Fd())); err == nil {
			defer procs.Close()
			fds = append(fds, procs)
		}
	}
	err = c.c.Send(ctl.Msg{Op: ctl.OpExec, ID: id, Argv: p.Argv, Dir: p.Dir}, fds...)
	pipes.closeChild()
	if err != nil {
		c.forget(id)
		return 0, errdefs.Unavailablef("sending the command to the sandbox: %w", err)
	}
	pipes.copy(p)
	var m ctl.Msg
	select {
	case m = <-exited:
	case <-c.gone:
		return 0, c.err
	case <-ctx.Done():
		// Kill its process group and wait for the report (pid1 reaps it at once).
		_ = c.c.Send(ctl.Msg{Op: ctl.OpSignal, ID: id, Sig: int(syscall.SIGKILL)})
		select {
		case <-exited:
		case <-c.gone:
		case <-time.After(5 * time.Second):
			c.forget(id)
		}
		pipes.wait(0)
		return 0, ctx.Err()
	}
	pipes.wait(outputGrace)
	if m.Error != "" {
		return 0, errdefs.Invalidf("%s", m.Error)
	}
	return m.Code, nil
}

func (c *control) forget(id uint64) {
	c.mu.Lock()
	delete(c.waiting, id)
	c.mu.Unlock()
}

// stdio is one exec's pipes: the child's ends go to process 1 (stdin's read end,
// stdout's and stderr's write ends); the host copies through its ends.
type stdio struct {
	child   []*os.File
	stdinW  *os.File
	outR    []*os.File // stdout, stderr
	copying sync.WaitGroup
}

func newStdio(p sandbox.Process) (*stdio, error) {
	s := &stdio{}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	s.child, s.stdinW = append(s.child, inR), inW
	for range 2 {
		r, w, err := os.Pipe()
		if err != nil {
			s.closeChild()
			s.close()
			return nil, err
		}
		s.child, s.outR = append(s.child, w), append(s.outR, r)
	}
	return s, nil
}

// copy feeds stdin and drains stdout and stderr in the background.
func (s *stdio) copy(p sandbox.Process) {
	go func() {
		if p.Stdin != nil {
			_, _ = io.Copy(s.stdinW, p.Stdin)
		}
		s.stdinW.Close()
	}()
	for i, w := range []io.Writer{p.Stdout, p.Stderr} {
		if w == nil {
			w = io.Discard
		}
		s.copying.Add(1)
		go func(r *os.File, w io.Writer) {
			defer s.copying.Done()
			_, _ = io.Copy(w, r)
		}(s.outR[i], w)
	}
}

// wait waits up to grace for the output to end, then cuts it off.
func (s *stdio) wait(grace time.Duration) {
	done := make(chan struct{})
	go func() { s.copying.Wait(); close(done) }()
	if grace > 0 {
		select {
		case <-done:
			return
		case <-time.After(grace):
		}
	}
	for _, r := range s.outR {
		r.Close()
	}
	<-done
}

func (s *stdio) closeChild() {
	ctl.CloseFiles(s.child)
	s.child = nil
}

func (s *stdio) close() {
	ctl.CloseFiles(s.outR)
	if s.stdinW != nil {
		s.stdinW.Close()
	}
}
