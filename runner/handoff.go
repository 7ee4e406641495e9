package runner

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"

	"github.com/cordonhq/cordon/internal/ctl"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/trace"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// errListener marks a refused egress listener: the sandbox's process 1 handed over
// something that is not a TCP listener on [sandbox.ProxyAddr] in a network namespace
// other than cordon's. The run does not start (exit 125), since its egress could not be
// confined.
var errListener = errors.New("the sandbox's egress listener is refused")

// prepareControl gives the sandbox's process 1 its control socket and token: a
// session's process 1 takes its commands there; and wherever the sandbox has a network
// namespace of its own, process 1 hands the listening socket of the sandbox's proxy
// clients over on it, in its hello, before any command runs (see [run.takeHello]). A
// one-command run of a [sandbox.Backend.LoopbackEgress] backend has none.
func (r *run) prepareControl(host *sandbox.Host) error {
	if !r.session && r.loopbackEgress() {
		return nil
	}
	path := filepath.Join(host.RunDir, "control.sock")
	ln, err := listenControl(path)
	if err != nil {
		return err
	}
	r.ctlLn, r.ctlToken = ln, newToken()
	host.ControlSocket, host.ControlToken = path, r.ctlToken
	r.undo.add("closing the control socket", func(context.Context) error { ln.Close(); return nil })
	return nil
}

// loopbackEgress reports whether the run's backend serves egress on a loopback port
// (no network namespace of its own, no listener handed over).
func (r *run) loopbackEgress() bool {
	return r.o.Backend.LoopbackEgress()
}

// takeHello takes what process 1's hello carried: on a backend with a network
// namespace exactly one descriptor, the egress listener, which is checked
// ([egressListener]) and then served by the run's proxy; on a loopback backend, or
// when the backend relays the connections ([run.serveRelayed]), none; and after it,
// when the run has a barrier, the barrier's listener ([barrier.take]).
// It closes every descriptor it does not keep. A hello that carries anything else is
// refused, and so is the run.
func (r *run) takeHello(files []*os.File) error {
	if r.bar != nil {
		// The barrier's listener comes last.
		if len(files) == 0 {
			return fmt.Errorf("%w: %w: process 1 sent none", errdefs.ErrSandbox, errNoBarrier)
		}
		last := files[len(files)-1]
		files = files[:len(files)-1]
		if err := r.bar.take(last); err != nil {
			ctl.CloseFiles(files)
			return fmt.Errorf("%w: %w", errdefs.ErrSandbox, err)
		}
		r.o.Log.Debug("the barrier holds the command's calls that may change a file until the baseline is read")
	}
	if r.loopbackEgress() || r.relayed.Load() {
		if len(files) != 0 {
			ctl.CloseFiles(files)
			return fmt.Errorf("%w: %w: process 1 sent %d descriptors where none were due", errdefs.ErrSandbox, errListener, len(files))
		}
		return nil
	}
	if len(files) != 1 {
		ctl.CloseFiles(files)
		return fmt.Errorf("%w: %w: process 1 sent %d descriptors with its hello, not the one listener", errdefs.ErrSandbox, errListener, len(files))
	}
	ln, err := egressListener(files[0], netip.MustParseAddrPort(sandbox.ProxyAddr))
	if err != nil {
		return fmt.Errorf("%w: %w: %w", errdefs.ErrSandbox, errListener, err)
	}
	r.eg.serve(ln)
	r.o.Log.Debug("egress proxy accepting on the sandbox's listener", "addr", sandbox.ProxyAddr)
	return nil
}

// serveRelayed is [sandbox.Host.ServeRelayed]: the service serves ln, where a
// relaying backend's sandbox's connections to it arrive. Each is taken once: egress
// never on a backend that serves a loopback port, the gate only in a run with gates.
func (r *run) serveRelayed(svc sandbox.Relayed, ln net.Listener) error {
	switch svc {
	case sandbox.RelayedEgress:
		if r.loopbackEgress() || !r.relayed.CompareAndSwap(false, true) {
			ln.Close()
			return fmt.Errorf("%w: %w: the egress listener was handed over twice", errdefs.ErrSandbox, errListener)
		}
		r.eg.serve(&relayedListener{Listener: ln, closed: make(chan struct{})})
	case sandbox.RelayedGate:
		if r.gates == nil {
			ln.Close()
			return fmt.Errorf("%w: a gate listener in a run without gates", errdefs.ErrSandbox)
		}
		if err := r.gates.serveRelayed(ln); err != nil {
			return err
		}
	default:
		ln.Close()
		return fmt.Errorf("%w: a relayed listener for %v, which no service takes", errdefs.ErrSandbox, svc)
	}
	r.o.Log.Debug("accepting on the sandbox's relayed listener", "service", svc.String())
	return nil
}

// relayedListener is a relayed egress listener as the proxy serves it: the sandbox
// ending closes the relay's listener, which is the sandbox's end, not the proxy's
// failure, so Accept then waits until the proxy itself closes the listener (at the
// run's teardown) rather than ending the proxy with an error.
type relayedListener struct {
	net.Listener
	once   sync.Once
	closed chan struct{}
}

func (l *relayedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if errors.Is(err, net.ErrClosed) {
		<-l.closed
	}
	return c, err
}

func (l *relayedListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// handOver, in a one-command run, takes process 1's hello (and with it the egress
// listener) while the sandbox starts, answers it, and hangs up: a one-command run takes
// no commands on the channel. Its result is read by handedOver once the command's
// sandbox has ended. It ends when the hello is taken or refused, when ctx ends, or
// when handedOver stops it.
func (r *run) handOver(ctx context.Context) {
	if r.ctlLn == nil || r.session {
		return
	}
	r.handoff = make(chan error, 1)
	ctx, r.handoffStop = context.WithCancel(ctx)
	// init.hello: from here (just before bwrap is spawned) to process 1's hello
	// taken: bwrap building the sandbox and cordon-init starting, seen from the host.
	sp := trace.Begin("init.hello")
	go func() {
		c, err := acceptControl(ctx, r.ctlLn, r.ctlToken, nil, r.takeHello)
		sp.End()
		if c != nil {
			c.close()
		}
		r.handoff <- err
	}()
}

// handedOver is why process 1's hello was refused, once the sandbox of a one-command run
// has ended (nil when it was taken, or never came: the sandbox's own error says why). A
// refusal is decided before process 1 sees the hang-up, so before its sandbox can end
// (see [acceptControl]).
func (r *run) handedOver() error {
	if r.handoff == nil {
		return nil
	}
	r.handoffStop() // nobody dials any more: an accept still waiting ends
	err := <-r.handoff
	r.handoff = nil
	if errors.Is(err, errListener) || errors.Is(err, errNoBarrier) {
		return err
	}
	return nil
}
