package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	// client-go's executors fail with this module's upgrade error, not
	// apimachinery's older copy of the package, which would never match it.
	"k8s.io/streaming/pkg/httpstream"

	"github.com/cordonhq/cordon/internal/ctl"
	"github.com/cordonhq/cordon/internal/ctlmux"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/termtext"
	"github.com/cordonhq/cordon/placement/kubernetes/podspec"
	"github.com/cordonhq/cordon/sandboxinit/wire"
)

// attachTimeout bounds the handshake: the exec, process 1's self-check, its answer.
const attachTimeout = time.Minute

// stderrBytes bounds what is kept of the attach relay's stderr, for errors.
const stderrBytes = 4 << 10

// Channel is a session's control channel to its Pod's process 1: Conn is a control
// connection like the one process 1 dials on the other backends (exec requests carry
// their stdin, stdout and stderr as descriptors, and are answered by their exits),
// relayed over an exec stream through the API server to `internal attach` in the Pod,
// which relays to process 1's control socket (internal/ctlmux).
type Channel struct {
	Conn *ctl.Conn
	UC   *net.UnixConn // Conn's socket
	// Egress, when the spec asks for egress (its Egress is the proxy address), is
	// where each connection a command makes to the proxy address in the Pod arrives,
	// relayed over the same stream: the caller serves its egress proxy on it
	// (egress.Proxy.Serve). Nil without egress. It is closed when the channel ends.
	Egress net.Listener
	// Gate, when the spec asks for gates (its Gate is the gate socket), is where each
	// connection a command makes to the gate socket in the Pod (`cordon gate NAME`)
	// arrives, relayed over the same stream: the caller serves the run's gate service
	// on it. Nil without gates. It is closed when the channel ends.
	Gate net.Listener

	cancel context.CancelFunc
	done   chan struct{} // closed when the exec stream and the relay are over
	mu     sync.Mutex
	err    error

	runMu  sync.Mutex // runMu serialises Run (run.go), Fill and Pack (workspace.go)
	runID  uint64     // the last exec id Run sent
	ran    bool       // Run sent a command: no Fill any more
	filled bool       // Fill was sent
	// workspace makes the exec of a fill or a pack (op) in the workspace sidecar.
	workspace func(op string) (remotecommand.Executor, error)
	// packs is the sidecar's stream serving packs (workspace.go), started by the
	// first Pack; nil until then and after it broke. runMu guards it.
	packs *packStream
	ctx   context.Context // the channel's life: the pack stream's too
}

// Attach opens the control channel of session s's Pod, which must be running: it
// execs `internal attach` in the sandbox container through the API server (rc is the
// client's config; WebSocket, or SPDY where the server has no WebSocket exec), sends
// process 1 spec, and waits for the outcome of its self-check. Process 1 takes one
// attach only: a second fails, as does any after a failed self-check (process 1
// exits). The channel ends the session when closed.
func (p *Placement) Attach(ctx context.Context, rc *rest.Config, s podspec.Session, spec wire.Spec) (*Channel, error) {
	data, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	ours, relay, err := linux.SeqpacketPair()
	if err != nil {
		return nil, errdefs.Unavailablef("control channel: %w", err)
	}
	ex, err := p.executor(rc, s.PodName(), podspec.ContainerName, podspec.AttachCommand())
	if err != nil {
		ours.Close()
		relay.Close()
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ch := &Channel{Conn: ctl.New(ours), UC: ours, cancel: cancel, done: make(chan struct{}), ctx: sctx}
	ch.workspace = func(op string) (remotecommand.Executor, error) {
		return p.executor(rc, s.PodName(), podspec.WorkspaceContainerName, podspec.WorkspaceCommand(p.cfg, op))
	}
	var ls ctlmux.Listeners
	if spec.Egress != "" {
		ls.Egress = ctlmux.NewListener()
		ch.Egress = ls.Egress
	}
	if spec.Gate != "" {
		ls.Gate = ctlmux.NewGateListener()
		ch.Gate = ls.Gate
	}
	go ch.run(sctx, ex, ctl.New(relay), ls)
	if err := ch.handshake(ctx, data); err != nil {
		ch.Close()
		return nil, err
	}
	return ch, nil
}

// executor is the exec of argv in container of pod: the attach relay in the
// sandbox container, or a fill or pack in the workspace sidecar.
func (p *Placement) executor(rc *rest.Config, pod, container string, argv []string) (remotecommand.Executor, error) {
	req := p.client.CoreV1().RESTClient().Post().Resource("pods").Namespace(p.cfg.Namespace).Name(pod).
		SubResource("exec").VersionedParams(&corev1.PodExecOptions{
		Container: container, Command: argv,
		Stdin: true, Stdout: true, Stderr: true,
	}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(rc, "GET", req.URL().String())
	if err != nil {
		return nil, errdefs.Unavailablef("exec: %w", err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(rc, "POST", req.URL())
	if err != nil {
		return nil, errdefs.Unavailablef("exec: %w", err)
	}
	return remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
}

// run streams the exec and relays over it until either ends.
func (ch *Channel) run(ctx context.Context, ex remotecommand.Executor, relay *ctl.Conn, ls ctlmux.Listeners) {
	defer close(ch.done)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	stderr := &tailBuffer{max: stderrBytes}
	var streamErr error
	streamed := make(chan struct{})
	go func() {
		defer close(streamed)
		streamErr = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: inR, Stdout: outW, Stderr: stderr})
		outW.CloseWithError(io.EOF)
		inR.Close()
	}()
	rerr := ctlmux.Host(relay, pipeStream{outR, inW}, ls)
	<-streamed
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if e := termtext.Line(strings.TrimSpace(stderr.String())); e != "" {
		streamErr = errors.Join(streamErr, fmt.Errorf("in the pod: %s", e))
	}
	ch.err = errors.Join(streamErr, rerr)
}

// handshake sends process 1 its spec and reads the outcome of its self-check.
func (ch *Channel) handshake(ctx context.Context, spec []byte) error {
	deadline := time.Now().Add(attachTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = ch.UC.SetReadDeadline(deadline)
	defer ch.UC.SetReadDeadline(time.Time{})
	stop := context.AfterFunc(ctx, func() { _ = ch.UC.SetReadDeadline(time.Now()) })
	defer stop()
	if err := ch.Conn.Send(ctl.Msg{Op: ctl.OpSpec, Spec: spec}); err != nil {
		return errdefs.Unavailablef("sending the pod's process 1 its spec: %w", err)
	}
	m, files, err := ch.Conn.Recv()
	ctl.CloseFiles(files)
	switch {
	case err != nil:
		ch.Close()
		return errdefs.Unavailablef("attaching to the pod's process 1: %w", errors.Join(err, ch.Err()))
	case m.Op != ctl.OpStatus:
		return errdefs.Unavailablef("attaching to the pod's process 1: %q where its status was due", m.Op)
	case m.Error != "":
		return fmt.Errorf("%w: the pod failed its self-check: %s", errdefs.ErrSandbox, m.Error)
	}
	return nil
}

// Done is closed when the channel is over (closed, or the stream ended).
func (ch *Channel) Done() <-chan struct{} { return ch.done }

// Err is why the stream ended, once Done is closed.
func (ch *Channel) Err() error {
	select {
	case <-ch.done:
	default:
		return nil
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.err
}

// Close hangs up: process 1 then ends the session (it kills every command and exits).
// It waits for the stream to end.
func (ch *Channel) Close() error {
	ch.Conn.Close()
	select {
	case <-ch.done:
	case <-time.After(teardownTimeout):
	}
	ch.cancel()
	<-ch.done
	return nil
}

// pipeStream is the exec stream as one io.ReadWriteCloser: reads are its stdout,
// writes its stdin; Close ends its stdin (the relay in the Pod sees the end and hangs
// up on process 1).
type pipeStream struct {
	r *io.PipeReader
	w *io.PipeWriter
}

func (s pipeStream) Read(b []byte) (int, error)  { return s.r.Read(b) }
func (s pipeStream) Write(b []byte) (int, error) { return s.w.Write(b) }
func (s pipeStream) Close() error                { return s.w.Close() }

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append([]byte(nil), t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
