package kubernetes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/cordonhq/cordon/internal/ctl"
	"github.com/cordonhq/cordon/internal/errdefs"
)

// The session's workspace volume is filled and read back through process 1, which
// runs the tar code in a child confined to the volume's second mount, one no
// command can reach (podspec.WorkspaceDir, sandboxinit/podws_linux.go). Its bounds
// are in process 1's spec: the volume's size in bytes, podspec.WorkspaceEntries
// entries.

// Errors of [Channel.Fill].
var (
	ErrFilled   = errors.New("the pod's workspace was filled already")
	ErrFillLate = errors.New("the pod's workspace is filled before any command runs")
)

// tarEnd is how every whole tar archive that archive/tar writes ends: two zero blocks.
const tarEnd = 1024

// Fill unpacks the tar archive r (as server/workspace.Pack writes one) into the Pod's
// workspace volume, .git and every read-only path included, before any command ran:
// a second Fill, or one after Run, fails with [ErrFilled] or [ErrFillLate] (process 1
// refuses them too). The archive is checked as server/workspace.Unpack checks one
// (paths, links, types, bounds). Fill is serialised with Run and Pack; it returns
// once process 1 has reported the outcome and r was read to its end or refused. When
// ctx ends first it returns ctx's error and the channel is out of step (close it).
func (ch *Channel) Fill(ctx context.Context, r io.Reader) error {
	ch.runMu.Lock()
	defer ch.runMu.Unlock()
	switch {
	case ch.filled:
		return ErrFilled
	case ch.ran:
		return ErrFillLate
	}
	ch.filled = true
	var stderr tailBuffer
	stderr.max = stderrBytes
	code, err := ch.workspaceOp(ctx, ctl.OpFill, r, io.Discard, &stderr)
	if err != nil {
		return fmt.Errorf("filling the pod's workspace: %w", err)
	}
	if code != 0 {
		return fmt.Errorf("%w: filling the pod's workspace: status %d: %s", errdefs.ErrSandbox, code, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// Pack writes the Pod's whole workspace volume to w as a tar archive, as
// server/workspace.Pack writes a directory: directories, regular files and symbolic
// links (never followed, even one a command puts in place of a directory as it is
// walked), special files left out (a FIFO is never opened), bounded by process 1's
// spec (the volume's size in bytes, podspec.WorkspaceEntries entries). Pack is
// serialised with Run and Fill; a command's background processes may still write the
// volume meanwhile. On an error, what was written to w is not a whole archive and
// must not be taken for one; Pack checks that the archive came whole (process 1's
// status, its end). When ctx ends first it returns ctx's error and the channel is
// out of step (close it).
func (ch *Channel) Pack(ctx context.Context, w io.Writer) error {
	ch.runMu.Lock()
	defer ch.runMu.Unlock()
	var stderr tailBuffer
	stderr.max = stderrBytes
	out := &tarSink{w: w}
	code, err := ch.workspaceOp(ctx, ctl.OpPack, nil, out, &stderr)
	switch {
	case err != nil:
		return fmt.Errorf("packing the pod's workspace: %w", err)
	case code != 0:
		return fmt.Errorf("%w: packing the pod's workspace: status %d: %s", errdefs.ErrSandbox, code, strings.TrimSpace(stderr.String()))
	case out.err != nil:
		return fmt.Errorf("packing the pod's workspace: writing it: %w", out.err)
	case out.n < tarEnd || !bytes.Equal(out.tail[:], make([]byte, tarEnd)):
		return fmt.Errorf("%w: packing the pod's workspace: the archive came cut short (%d bytes)", errdefs.ErrSandbox, out.n)
	}
	return nil
}

// workspaceOp sends op as an exec is sent, with stdin (nil: empty) and its output
// copied to stdout and stderr, and returns process 1's status for it once both
// outputs ended. The caller holds runMu.
func (ch *Channel) workspaceOp(ctx context.Context, op string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	ch.runID++
	id := ch.runID
	var fds [6]*os.File // stdin r/w, stdout r/w, stderr r/w
	for i := 0; i < 6; i += 2 {
		r, w, err := os.Pipe()
		if err != nil {
			ctl.CloseFiles(fds[:i])
			return 0, err
		}
		fds[i], fds[i+1] = r, w
	}
	err := ch.Conn.Send(ctl.Msg{Op: op, ID: id}, fds[0], fds[3], fds[5])
	ctl.CloseFiles([]*os.File{fds[0], fds[3], fds[5]})
	if err != nil {
		ctl.CloseFiles([]*os.File{fds[1], fds[2], fds[4]})
		return 0, errdefs.Unavailablef("sending the request: %w", err)
	}
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		if stdin != nil {
			_, _ = io.Copy(fds[1], stdin)
		}
		fds[1].Close()
	}()
	var copies sync.WaitGroup
	for _, c := range []struct {
		r *os.File
		w io.Writer
	}{{fds[2], stdout}, {fds[4], stderr}} {
		copies.Add(1)
		go func() {
			defer copies.Done()
			drain(c.w, c.r)
		}()
	}
	code, err := ch.waitExit(ctx, id)
	// The relay sends a fill's or a pack's exit after all its output (ctlmux), and
	// closes the outputs with it: the copies end now. On an error they are cut.
	if err != nil {
		fds[2].Close()
		fds[4].Close()
	}
	copies.Wait()
	fds[2].Close()
	fds[4].Close()
	if err == nil {
		<-fed // process 1 exited: the stdin copy fails at its next write, or ended
	}
	return code, err
}

// drain copies r to w and, should w fail, reads r to its end anyway: the relay
// writes every output of the stream in turn, and one left unread would stop them all.
func drain(w io.Writer, r io.Reader) {
	if _, err := io.Copy(w, r); err != nil {
		_, _ = io.Copy(io.Discard, r)
	}
}

// tarSink passes a pack's archive on to w, keeping its length, its last tarEnd
// bytes and w's first error (after which the rest is dropped).
type tarSink struct {
	w    io.Writer
	n    int64
	tail [tarEnd]byte
	err  error
}

func (s *tarSink) Write(p []byte) (int, error) {
	s.n += int64(len(p))
	if len(p) >= tarEnd {
		copy(s.tail[:], p[len(p)-tarEnd:])
	} else {
		copy(s.tail[:], s.tail[len(p):])
		copy(s.tail[tarEnd-len(p):], p)
	}
	if s.err == nil {
		if _, err := s.w.Write(p); err != nil {
			s.err = err
		}
	}
	return len(p), nil
}
