package kubernetes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/client-go/tools/remotecommand"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/termtext"
	"github.com/cordonhq/cordon/server/workspace"
)

// The session's workspace volume is filled and read back in the Pod's workspace
// sidecar (podspec.WorkspaceContainerName), which mounts the whole volume and which
// no command can reach: the placement execs `internal podws fill|pack` there through
// the API server, the tar on the exec's stdin or stdout (sandboxinit/podws_linux.go).
// The bounds are the volume's size in bytes and podspec.WorkspaceEntries entries.

// Errors of [Channel.Fill].
var (
	ErrFilled   = errors.New("the pod's workspace was filled already")
	ErrFillLate = errors.New("the pod's workspace is filled before any command runs")
)

// tarEnd is how every whole tar archive that archive/tar writes ends: two zero blocks.
const tarEnd = 1024

// Fill unpacks the tar archive r (as server/workspace.Pack writes one) into the Pod's
// workspace volume, .git and every read-only path included, before any command ran:
// a second Fill, or one after Run, fails with [ErrFilled] or [ErrFillLate]. The
// archive is checked as server/workspace.Unpack checks one (paths, links, types,
// bounds). Fill is serialised with Run and Pack (one lock); it returns once the
// sidecar has unpacked r to its end, or refused it.
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
	if err := ch.workspaceOp(ctx, "fill", r, io.Discard); err != nil {
		return fmt.Errorf("filling the pod's workspace: %w", err)
	}
	return nil
}

// Pack writes the Pod's whole workspace volume to w as a tar archive, as
// server/workspace.Pack writes a directory: directories, regular files and symbolic
// links (never followed, even one a command puts in place of a directory as it is
// walked), special files left out (a FIFO is never opened), bounded by the volume's
// size in bytes and podspec.WorkspaceEntries entries. Pack is serialised with Run
// and Fill (one lock); a command's background processes may still write the volume
// meanwhile, and may make a Pack fail (a file that changes size as it is read): try
// again. On an error, what was written to w is not a whole archive and must not be
// taken for one; Pack checks that it came whole (the exec's status, the archive's
// end).
func (ch *Channel) Pack(ctx context.Context, w io.Writer) error {
	return ch.pack(ctx, w, packWhole)
}

// PackChanges is [Channel.Pack] of what changed since the last pack the caller took
// whole (server/workspace.PackChanges: the Pod's workspace sidecar keeps the stamps
// of its last pack), for server/workspace.SyncFrom with changes: an archive of the
// changes when the sidecar has that pack's stamps, of the whole tree when it has
// none (its first pack, a stream started anew, a pack that failed). The caller
// must have taken the last pack whole (a sync that failed part way asks for the
// whole tree with Pack).
func (ch *Channel) PackChanges(ctx context.Context, w io.Writer) error {
	return ch.pack(ctx, w, packChanges)
}

// The requests of the sidecar's pack stream (sandboxinit's servePacks).
const (
	packWhole   = 'p'
	packChanges = 'c'
)

func (ch *Channel) pack(ctx context.Context, w io.Writer, req byte) error {
	ch.runMu.Lock()
	defer ch.runMu.Unlock()
	out := &tarSink{w: w}
	if err := ch.packServed(ctx, out, req); err != nil {
		return fmt.Errorf("packing the pod's workspace: %w", err)
	}
	switch {
	case out.err != nil:
		return fmt.Errorf("packing the pod's workspace: writing it: %w", out.err)
	case out.n < tarEnd || !bytes.Equal(out.tail[:], make([]byte, tarEnd)):
		return fmt.Errorf("%w: packing the pod's workspace: the archive came cut short (%d bytes)", errdefs.ErrSandbox, out.n)
	}
	return nil
}

// workspaceOp execs op in the workspace sidecar with stdin (nil: none) and its
// stdout copied to stdout, and waits for its end. The caller holds runMu.
func (ch *Channel) workspaceOp(ctx context.Context, op string, stdin io.Reader, stdout io.Writer) error {
	if ch.workspace == nil {
		return errors.New("this channel has no workspace sidecar")
	}
	ex, err := ch.workspace(op)
	if err != nil {
		return err
	}
	if stdin == nil {
		stdin = strings.NewReader("") // the exec's stdin ends at once
	}
	stderr := &tailBuffer{max: stderrBytes}
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr})
	if err != nil {
		if e := termtext.Line(strings.TrimSpace(stderr.String())); e != "" {
			err = fmt.Errorf("%w: %w: %s", errdefs.ErrSandbox, err, e)
		}
		return err
	}
	return nil
}

// packServed packs the workspace through the sidecar's pack stream (`podws serve`),
// starting it when there is none: one exec for the channel's life rather than one
// per pack. A stream that breaks, or a pack ctx ends, is closed and never reused; the
// next Pack starts another. The caller holds runMu.
func (ch *Channel) packServed(ctx context.Context, out io.Writer, req byte) error {
	if ch.packs == nil {
		ps, err := ch.startPacks()
		if err != nil {
			return err
		}
		ch.packs = ps
	}
	ps := ch.packs
	stop := context.AfterFunc(ctx, ps.close) // what is on the stream then is not a whole pack
	ok, err := ps.pack(out, req)
	if !stop() || !ok {
		ps.close()
		ch.packs = nil
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return err
}

// packStream is the workspace sidecar's `podws serve` exec: a request byte on its
// stdin, a framed pack back on its stdout (server/workspace.ReadFramed).
type packStream struct {
	in     *io.PipeWriter
	out    *io.PipeReader
	stderr *tailBuffer
	cancel context.CancelFunc
}

// startPacks starts the sidecar's pack stream, for the channel's life at most.
func (ch *Channel) startPacks() (*packStream, error) {
	if ch.workspace == nil {
		return nil, errors.New("this channel has no workspace sidecar")
	}
	ex, err := ch.workspace("serve")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ch.ctx)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ps := &packStream{in: inW, out: outR, stderr: &tailBuffer{max: stderrBytes}, cancel: cancel}
	go func() {
		err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: inR, Stdout: outW, Stderr: ps.stderr})
		if err == nil {
			err = errors.New("it ended")
		}
		if e := termtext.Line(strings.TrimSpace(ps.stderr.String())); e != "" {
			err = fmt.Errorf("%w: %s", err, e)
		}
		outW.CloseWithError(fmt.Errorf("%w: the workspace sidecar's pack stream: %w", errdefs.ErrSandbox, err))
		inR.Close()
		cancel()
	}()
	return ps, nil
}

// pack asks for one pack (req) and copies it to out; ok says whether the stream can
// serve the next.
func (ps *packStream) pack(out io.Writer, req byte) (ok bool, err error) {
	if _, err := ps.in.Write([]byte{req}); err != nil {
		return false, err
	}
	return workspace.ReadFramed(ps.out, out)
}

// close ends the stream: the exec's context, and both pipes (a read or write on them
// returns at once).
func (ps *packStream) close() {
	ps.cancel()
	ps.in.Close()
	ps.out.Close()
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
