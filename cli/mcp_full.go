//go:build !noengines || !linux

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/gate"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/mcp"
	"github.com/cordonhq/cordon/runner"
	"github.com/cordonhq/cordon/session"
	"github.com/cordonhq/cordon/session/wire"
)

// mcpStopTimeout bounds the session's teardown when the connection ends.
const mcpStopTimeout = 2 * time.Minute

// serveMCP starts a session, serves MCP over stdio until the connection ends, then
// stops the session. The supervisor holds a pipe whose other end only this process
// has: if it dies without stopping the session (kill -9), the supervisor stops it.
func serveMCP(ctx context.Context, stdio IO, o sessionStartOptions) error {
	// A client gone mid-answer makes a write to stdout fail with EPIPE, not kill this
	// process before it stops the session. Notified, not ignored: an ignored signal
	// stays ignored in what this process starts (the supervisor, and what it starts).
	pipes := make(chan os.Signal, 1)
	signal.Notify(pipes, syscall.SIGPIPE)
	defer signal.Stop(pipes)
	ctx, stopSignals := withSignals(ctx)
	defer stopSignals()
	holdR, holdW, err := os.Pipe()
	if err != nil {
		return reportRunError(stdio, err)
	}
	defer holdW.Close()
	id, err := spawnSupervisor(o, holdR)
	holdR.Close()
	if err != nil {
		return reportStartError(stdio, err)
	}
	fmt.Fprintf(stdio.Stderr, "cordon: mcp: session %s started\n", id)
	sess, err := session.Open(id)
	if err != nil {
		return clientError(stdio, err)
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), mcpStopTimeout)
		defer cancel()
		if err := sess.Stop(stopCtx); err != nil {
			fmt.Fprintf(stdio.Stderr, "cordon: mcp: stopping session %s: %s\n", id, errdefs.Message(err))
			return
		}
		fmt.Fprintf(stdio.Stderr, "cordon: mcp: session %s stopped, its log sealed\n", id)
	}()
	srv := mcp.New(sess, mcp.Options{Version: Version, Stage: o.stage, Gates: mcpGates(stdio, o), MaxTimeout: mcpMaxTimeout(sess.Info())})
	in, out := newEOFReader(stdio.Stdin), &stallWriter{w: stdio.Stdout}
	t := mcp.Stdio(in, nopWriteCloser{out})
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, t) }()
	err = awaitMCP(ctx, done, in, out)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(stdio.Stderr, "cordon: mcp: connection: %v\n", err)
	}
	// 128+N when a signal ended it, as every cordon command exits (docs/cli.md); the
	// deferred stop runs first.
	var sig runner.SignalError
	if errors.As(context.Cause(ctx), &sig) {
		if n, ok := sig.Sig.(syscall.Signal); ok {
			return errdefs.Exit(128 + int(n))
		}
	}
	return nil
}

// awaitMCP waits for the connection's end: the server's return, a signal (at once: a
// read of stdin that does not end with ctx must not keep the session up), or, once the
// input has ended, an answer the client has not read for mcpOutputStall (the calls in
// flight are otherwise answered: a client may send its requests and close its input).
func awaitMCP(ctx context.Context, done <-chan error, in *eofReader, out *stallWriter) error {
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return nil
	case <-in.ended:
	}
	quit := make(chan struct{})
	defer close(quit)
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return nil
	case <-out.stalled(mcpOutputStall, quit):
		return fmt.Errorf("the client closed its input and has read no answer for %s", mcpOutputStall)
	}
}

// mcpGates are the gates of the contract in force that a person may approve: none
// with --gates deny, which refuses every request, and none whose approve is deny. The
// gate tool is listed only when there is one.
func mcpGates(stdio IO, o sessionStartOptions) []mcp.Gate {
	if *o.gates == gate.DenyAll {
		return nil
	}
	c, err := loadContract(o.file)
	if err != nil {
		fmt.Fprintf(stdio.Stderr, "cordon: mcp: no gate tool: %s\n", errdefs.Message(err))
		return nil
	}
	var gs []mcp.Gate
	for _, g := range c.Gates {
		if g.Approve.Value != contract.ApproveDeny {
			gs = append(gs, mcp.Gate{Name: g.Name.Value, Why: g.Why})
		}
	}
	return gs
}

// mcpMaxTimeout is the longest timeout_seconds the agent may ask exec for: the
// contract's commands.timeout, which its session's record carries. The agent is
// not the host's user (whose cordon exec --timeout may lengthen it): a longer
// commands.timeout is a wider contract (cordon contract diff), so the agent may
// shorten it, never lengthen it, as a served MCP session's agent may not. A
// record without it (an older supervisor) lets the agent ask for no timeout
// past a second.
func mcpMaxTimeout(info wire.Info) time.Duration {
	if info.TimeoutMS <= 0 {
		return time.Second
	}
	return time.Duration(info.TimeoutMS) * time.Millisecond
}

// nopWriteCloser is w, not closed by the transport (stdout outlives the connection).
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
