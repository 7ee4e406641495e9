package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/seccomp"
	"github.com/cordonhq/cordon/internal/trace"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// A direct one-command run need not hold its command until the workspace's baseline
// is read (issue 39: most of a run's start in a large checkout). A barrier instead
// holds only the command's calls that may change a file: process 1 forks the command
// from a thread that carries, beside the main seccomp filter, the barrier filter
// (internal/seccomp.Barrier), whose listener it hands to cordon in its hello and keeps
// no copy of. cordon lets each held call continue once the baseline is complete, and
// every one after that at once, for the rest of the run. Nothing of the command can
// change the workspace before the baseline has read it, so the diff is what it would
// have been had the command waited. Where the barrier cannot be had, the command waits
// for the baseline as before (wantBarrier says why, in the debug log).

// barrier is the host's side of a run's barrier. Its methods are safe for concurrent
// use.
type barrier struct {
	open chan struct{} // closed once the baseline is complete: held calls continue
	stop chan struct{} // closed when the run gives the barrier up (shut)
	// hurry is closed once something waits for the baseline (a held call, gated
	// output, the command's end with a change set to check): until then the baseline
	// reads one directory at a time (fsdiff.Options.Hurry), leaving the cores to the
	// sandbox's start and the command.
	hurry     chan struct{}
	openOnce  sync.Once
	stopOnce  sync.Once
	hurryOnce sync.Once
	held      atomic.Int64 // calls received before open
	passed    atomic.Int64 // calls continued
	// received says the command made a call that may bring a descriptor in (one of
	// receiving: seccomp.Receiving's numbers): the change set cannot see every write
	// it makes.
	received  atomic.Bool
	receiving []int32
	taken     atomic.Bool // the listener was handed over
	mu        sync.Mutex  // mu guards l.
	l         *linux.SeccompListener
	log       *slog.Logger
	root      os.FileInfo // the workspace's directory before the command ran
}

// errNoBarrier: process 1 sent no barrier listener, or something else in its place.
var errNoBarrier = errors.New("the sandbox's barrier listener is refused")

// wantBarrier says why the run's command cannot start before its baseline is read
// ("" when it can): a direct one-command run as root, whose diff comes from the change
// set, on a sandbox whose process 1 loads the barrier, on a kernel that has it.
func (r *run) wantBarrier() string {
	b, ok := r.sb.(sandbox.Barrier)
	switch {
	case !r.early || !r.wantsChanges():
		return "not a direct one-command run"
	case os.Geteuid() != 0:
		return "not root"
	case r.live == nil || r.walkWhy != "":
		return "no change set"
	case r.ctlLn == nil || !ok || !b.Barrier():
		return "the sandbox has no barrier"
	}
	return linux.SeccompListenerSupported()
}

func newBarrier(log *slog.Logger) *barrier {
	b := &barrier{open: make(chan struct{}), stop: make(chan struct{}), hurry: make(chan struct{}), log: log}
	if arch, err := seccomp.Native(); err == nil { // on another, process 1 loads no barrier
		b.receiving = seccomp.Receiving(arch)
	}
	return b
}

// hurryUp says something waits for the baseline: it reads at full speed from now on.
// It is idempotent.
func (b *barrier) hurryUp() {
	b.hurryOnce.Do(func() { close(b.hurry) })
}

// take serves f, process 1's barrier listener, until every process of the sandbox is
// gone or the barrier is shut: each call it holds waits until release, then continues.
func (b *barrier) take(f *os.File) error {
	if !linux.IsSeccompListener(f) {
		f.Close()
		return fmt.Errorf("%w: not a seccomp listener", errNoBarrier)
	}
	l, err := linux.NewSeccompListener(f)
	if err != nil {
		return fmt.Errorf("%w: %w", errNoBarrier, err)
	}
	if err := l.SyncWakeUp(); err != nil {
		b.log.Debug("the barrier's continued calls wake up the usual way", "err", err)
	}
	b.mu.Lock()
	b.l = l
	b.mu.Unlock()
	b.taken.Store(true)
	select {
	case <-b.stop:
		l.Close() // shut before it was taken
		return nil
	default:
	}
	go b.serve(l)
	return nil
}

func (b *barrier) serve(l *linux.SeccompListener) {
	defer l.Close() // on any failure held calls, and all later ones, fail (ENOSYS)
	for {
		c, err := l.Receive()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
				b.log.Debug("the barrier stops serving", "err", err)
			}
			return
		}
		if slices.Contains(b.receiving, c.Nr) {
			b.received.Store(true) // before the call goes on
		}
		select {
		case <-b.open:
		default:
			b.held.Add(1)
			b.hurryUp()
			select {
			case <-b.open:
			case <-b.stop:
				return
			}
		}
		if err := l.Continue(c.ID); err != nil {
			b.log.Debug("the barrier stops serving", "err", err)
			return
		}
		b.passed.Add(1)
	}
}

// release lets every held call, and all later ones, continue: the baseline is
// complete.
func (b *barrier) release() {
	b.openOnce.Do(func() { close(b.open) })
}

// shut gives the barrier up: calls still held, and all later ones, fail (ENOSYS) if it
// was never released. It is idempotent.
func (b *barrier) shut() {
	b.stopOnce.Do(func() { close(b.stop) })
	b.hurryUp()
	b.mu.Lock()
	if b.l != nil {
		b.l.Close()
	}
	b.mu.Unlock()
}

// gate is w, whose writes wait until the barrier is released (or shut): cordon's
// copy of the command's output to its own stdout and stderr, which the caller may
// have redirected into a file of the workspace (`cordon run -- cmd > out.log`). The
// barrier holds the command's own calls only; a write cordon makes for it there
// before the baseline has read the file would be in the baseline, and missing from
// the diff. The command waits meanwhile as on any full pipe.
func (b *barrier) gate(w io.Writer) io.Writer { return &gatedWriter{w: w, b: b} }

// gateFor is gate(w) unless dst, the caller's writer that w copies the command's
// output to, is on no file system at all: an anonymous pipe, a socket, a
// pseudo-terminal (linux.OnNoFileSystem). What is written there reaches the
// workspace only if a host process on the other side writes it there (`| tee
// out.log`), the class the barrier does not hold (docs/audit.md). Anything else may
// be a file of the workspace that cordon's write changes: a regular file, a named
// pipe or a device node (whose times a write moves), a writer that is not a file.
func (b *barrier) gateFor(w, dst io.Writer) io.Writer {
	if f, ok := dst.(*os.File); ok && linux.OnNoFileSystem(f) {
		return w
	}
	return b.gate(w)
}

type gatedWriter struct {
	w io.Writer
	b *barrier
}

func (g *gatedWriter) Write(p []byte) (int, error) {
	_ = g.b.wait(context.Background())
	return g.w.Write(p)
}

// wait returns once the barrier is released or shut (or ctx is done: its error),
// hurrying the baseline meanwhile: something cordon does on the host for the
// command is about to change the workspace.
func (b *barrier) wait(ctx context.Context) error {
	select {
	case <-b.open:
		return nil
	case <-b.stop:
		return nil
	default:
	}
	b.hurryUp()
	select {
	case <-b.open:
	case <-b.stop:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// afterBaseline waits, when the run's command has a barrier, until the barrier is
// released: a gate's operation, which runs on the host in the workspace at the
// command's request, writes there only once the baseline is read.
// A barrier shut unreleased (the baseline failed: the run is stopping) refuses it.
func (r *run) afterBaseline(ctx context.Context) error {
	b := r.barPtr.Load()
	if b == nil {
		return nil
	}
	if err := b.wait(ctx); err != nil {
		return err
	}
	select {
	case <-b.open:
		return nil
	default:
		return errors.New("the workspace's baseline could not be read: the run is stopping")
	}
}

// barrierEnd, once the command of a run with a barrier has ended (err: how), takes the
// change set and, when it says nothing changed, ends the baseline early (skip): the
// diff is empty whatever the baseline would have read. It reports whether it did.
func (r *run) barrierEnd(err error, skip func()) (skipped bool) {
	if r.bar == nil {
		return false
	}
	defer func() {
		if !skipped {
			r.bar.hurryUp() // the diff waits for the baseline
		}
	}()
	if !r.bar.taken.Load() {
		return false
	}
	// Counted before each held call went on, so before the command ended.
	r.o.Log.Debug("the barrier's held calls", "held", r.bar.held.Load())
	if r.bar.received.Load() {
		// The barrier held it until the baseline was read; the walk sees what it
		// wrote, the change set may not.
		r.noChanges("the command received from a socket (recvmsg): a descriptor passed in, open since before the watch, writes through a shared mapping with no event the watch sees")
	}
	if err != nil {
		return false
	}
	// A one-command run's sandbox ended with its command (see commandEnded).
	r.takeChanges()
	sp := trace.Begin("changes.nothing")
	why := r.nothingChanged()
	sp.End()
	if why == "" {
		skip()
		return true
	}
	args := []any{"why", why}
	if r.watched != nil {
		args = append(args, "paths", len(r.watched.Paths), "objects", len(r.watched.Objects))
	}
	r.o.Log.Debug("the diff waits for the baseline", args...)
	return false
}
