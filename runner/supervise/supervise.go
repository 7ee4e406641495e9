// Package supervise is a session's supervisor side (`cordon internal supervise`): it
// [Publish]es the session's socket and record, then [Server.Serve]s the clients'
// requests (exec, sweep, checkpoint, rollback, stop) on the runner's session until it
// stops. It is apart from package session, the client, so that clients (a harness,
// cordon-exec) link no runner.
package supervise

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/cordonhq/cordon/internal/atomicfile"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/owner"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/internal/trace"
	"github.com/cordonhq/cordon/runner"
	"github.com/cordonhq/cordon/session/wire"
)

// lockedEncoder serialises JSON lines written to one connection by the stdout and
// stderr copiers.
type lockedEncoder struct {
	mu  sync.Mutex // mu guards enc.
	enc *json.Encoder
}

func (e *lockedEncoder) Encode(v any) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.enc.Encode(v)
}

// Serve serves the session's socket until a stop request, ctx's end (a signal) or the
// sandbox's end, then tears the session down, removes what Publish made and answers
// every stop request: a client whose stop is answered finds nothing of the session
// left. The socket stays open through the teardown so that a stop sent meanwhile (a
// second one, or one sent as the sandbox's own end is being torn down) waits for it
// too, rather than finding no socket while the workspace still holds the run's
// placeholders. It returns how the session's Close went.
func (s *Server) Serve(ctx context.Context) error {
	defer s.remove() // on every path; a second call does nothing
	sess := s.sess
	st := &stops{requested: make(chan struct{})}
	// execCtx ends every running command: on stop and on a signal.
	execCtx, cancelExecs := context.WithCancelCause(ctx)
	defer cancelExecs(nil)
	go accept(execCtx, sess, s.ln, st)
	select {
	case <-st.requested:
	case <-ctx.Done():
	case <-sess.Done(): // the sandbox ended on its own: tear down and say why
	}
	st.stop()
	cancelExecs(errStopped)
	err := sess.Close(ctx)
	s.remove()
	f := wire.Frame{Done: true}
	switch {
	case err != nil:
		f = errFrame(err)
	case ctx.Err() != nil:
		// The log's run.end says the signal ended it (exit 143, say), not this stop.
		f = errFrame(errdefs.Unavailablef("session %s was ended by a signal to its supervisor", sess.ID()))
	}
	st.answer(f)
	return err
}

// Record is what a session's published record says besides its id, supervisor and log.
type Record struct {
	Contract  string // the contract file, "" for the built-in default
	Backend   string
	Workspace string
}

// Server is a session's supervisor side: its socket, listening, and its record.
type Server struct {
	sess *runner.Session
	root paths.Root
	ln   net.Listener
}

// Publish listens on session sess's socket (0600) in root's sessions directory and
// writes its record (wire.Info), both under the session id, so that clients find it.
func Publish(sess *runner.Session, rec Record, root paths.Root) (*Server, error) {
	id := sess.ID()
	s := &Server{sess: sess, root: root}
	sock, info := root.SessionSocket(id), root.SessionInfo(id)
	if err := paths.CheckDir(root.Sessions(), paths.Owner()); err != nil {
		return nil, err
	}
	ln, err := net.Listen("unix", sock)
	if err == nil {
		s.ln = ln
		err = os.Chmod(sock, 0o600)
	}
	if err == nil {
		si := wire.Info{ID: id, Process: owner.Self(), Started: time.Now().UTC(),
			Contract: rec.Contract, Backend: rec.Backend, Workspace: rec.Workspace, AuditDir: sess.AuditDir(),
			TimeoutMS: sess.Timeout().Milliseconds()}
		data, _ := json.Marshal(si)
		err = atomicfile.Write(info, data, 0o600)
	}
	if err != nil {
		s.remove()
		return nil, err
	}
	return s, nil
}

// remove closes the listener and removes the socket, the record and the log.
func (s *Server) remove() {
	if s.ln != nil {
		s.ln.Close()
	}
	id := s.sess.ID()
	for _, p := range []string{s.root.SessionSocket(id), s.root.SessionInfo(id), s.root.SessionLog(id)} {
		os.Remove(p)
	}
}

// serveConn answers one request.
func serveConn(ctx context.Context, sess *runner.Session, c net.Conn, st *stops) {
	br := bufio.NewReader(c)
	line, err := readRequest(c, br)
	var req wire.Request
	if err == nil {
		err = json.Unmarshal(line, &req)
	}
	enc := &lockedEncoder{enc: json.NewEncoder(c)}
	if err != nil {
		_ = enc.Encode(errFrame(errdefs.Usagef("bad request: %w", err)))
		c.Close()
		return
	}
	if req.Op == "stop" {
		st.add(c)
		return
	}
	if st.isStopping() {
		_ = enc.Encode(errFrame(errdefs.Unavailablef("session %s is stopping", sess.ID())))
		c.Close()
		return
	}
	switch req.Op {
	case "sweep":
		turn, err := sess.Sweep()
		f := wire.Frame{Done: true, Removed: turn.Removed, Changed: turn.Changed, More: turn.More}
		if err != nil {
			f = errFrame(err)
		}
		_ = enc.Encode(f)
		c.Close()
		return
	case "checkpoint", "rollback":
		_ = enc.Encode(serveStaged(ctx, sess, req))
		c.Close()
		return
	case "exec":
		defer c.Close()
		if !st.addExec(c) {
			_ = enc.Encode(errFrame(errdefs.Unavailablef("session %s is stopping", sess.ID())))
			return
		}
		defer st.doneExec(c)
		serveExec(ctx, sess, req, br, enc)
	default:
		_ = enc.Encode(errFrame(errdefs.Usagef("unknown op %q", req.Op)))
		c.Close()
	}
}

// serveExec runs one exec request and answers with its output chunks and result. The
// client going away (cordon exec interrupted) ends the command.
func serveExec(ctx context.Context, sess *runner.Session, req wire.Request, br *bufio.Reader, enc *lockedEncoder) {
	defer trace.Begin("supervise.exec").End()
	if req.Cap < 0 || req.TimeoutMS < 0 {
		_ = enc.Encode(errFrame(errdefs.Usagef("cap and timeout_ms must not be negative")))
		return
	}
	if req.Cap > wire.MaxCap {
		_ = enc.Encode(errFrame(errdefs.Usagef("cap: at most %d characters", wire.MaxCap)))
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stdin io.Reader
	if req.Stdin {
		pr, pw := io.Pipe()
		defer pr.Close()
		stdin = pr
		go func() {
			pw.CloseWithError(readInput(br, pw))
			_, _ = io.Copy(io.Discard, br) // until the client hangs up
			cancel()
		}()
	} else {
		go func() {
			_, _ = io.Copy(io.Discard, br)
			cancel()
		}()
	}
	res, err := sess.Exec(ctx, req.Argv, runner.ExecOptions{
		Dir: req.Dir, Timeout: time.Duration(req.TimeoutMS) * time.Millisecond, Cap: req.Cap, Stdin: stdin,
		Stdout: frameWriter{enc: enc, fd: 1}, Stderr: frameWriter{enc: enc, fd: 2},
	})
	if err != nil {
		if errors.Is(err, errdefs.ErrInvalid) {
			// What the session refuses to run (no command, a working directory that
			// does not exist) is a bad request: the caller's usage error.
			err = &errdefs.Status{Code: errdefs.ExitUsage, Err: err}
		}
		_ = enc.Encode(errFrame(err))
		return
	}
	_ = enc.Encode(wire.Frame{Result: &wire.Result{
		V: wire.ResultVersion, Session: sess.ID(), Cmd: res.CmdID, ExitCode: res.ExitCode,
		Truncated: res.Output[0].Truncated || res.Output[1].Truncated,
		SpillPath: res.Output[0].SpillPath, StderrSpillPath: res.Output[1].SpillPath,
		DurationMS: res.Duration.Milliseconds(), TimedOut: res.TimedOut, Reason: res.Reason,
		Diffstat:     wire.Diffstat{Files: res.FilesChanged, Insertions: res.Insertions, Deletions: res.Deletions},
		DeniedEgress: res.DeniedEgress, Denied: WireDenials(res.Denied), DeniedMore: res.DeniedMore, Alerts: WireAlerts(res.Alerts),
		Gates: res.Gates, GatesMore: res.GatesMore,
	}})
}

// serveStaged answers a checkpoint or rollback request.
func serveStaged(ctx context.Context, sess *runner.Session, req wire.Request) wire.Frame {
	var cp runner.Checkpoint
	var f wire.Frame
	var err error
	if req.Op == "checkpoint" {
		cp, err = sess.Checkpoint(req.Name)
		f.Problems = cp.Problems
	} else {
		var rb runner.RollbackResult
		rb, err = sess.Rollback(ctx, req.Name)
		cp, f.Changed, f.Problems = rb.To, rb.Changed, rb.Problems
	}
	if err != nil {
		if errors.Is(err, errdefs.ErrInvalid) {
			err = &errdefs.Status{Code: errdefs.ExitUsage, Err: err}
		}
		ef := errFrame(err)
		ef.Changed, ef.Problems = f.Changed, f.Problems
		return ef
	}
	f.Done = true
	f.Checkpoint = &wire.Checkpoint{N: cp.N, Name: cp.Name, Auto: cp.Auto, Copied: cp.Copied, Linked: cp.Linked}
	return f
}

// WireDenials converts the runner's denials to the wire's (as `cordon exec` and
// `cordon run` show them).
func WireDenials(ds []runner.Denial) []wire.Denial {
	out := make([]wire.Denial, 0, len(ds))
	for _, d := range ds {
		out = append(out, wire.Denial{Destination: d.Destination, Reason: d.Reason, SuggestedRule: d.SuggestedRule})
	}
	return out
}

// WireAlerts converts the runner's alerts to the wire's.
func WireAlerts(as []runner.Alert) []wire.Alert {
	out := make([]wire.Alert, 0, len(as))
	for _, a := range as {
		out = append(out, wire.Alert{Category: a.Category, Target: a.Target, Syscall: a.Syscall, Count: a.Count})
	}
	return out
}

// errFrame answers a request with err: its message, the status `cordon exec` exits
// with (125 unless err carries another), and whether the disk was full.
func errFrame(err error) wire.Frame {
	noSpace := errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
	err = errdefs.CannotRun(err)
	return wire.Frame{Error: errdefs.Message(err), Code: errdefs.ExitCode(err), NoSpace: noSpace}
}

// readInput copies Input lines to w until EOF is sent; a client that hangs up first
// is an error.
func readInput(br *bufio.Reader, w io.Writer) error {
	for {
		var in wire.Input
		line, err := readLine(br)
		if err == nil || errors.Is(err, io.EOF) && len(line) > 0 { // a last line unended
			err = json.Unmarshal(line, &in)
		}
		if err != nil {
			return fmt.Errorf("stdin: %w", err)
		}
		if len(in.Data) > 0 {
			if _, err := w.Write(in.Data); err != nil {
				return nil // the command closed its stdin
			}
		}
		if in.EOF {
			return nil
		}
	}
}

// frameWriter sends what it is given as output chunks of fd.
type frameWriter struct {
	enc *lockedEncoder
	fd  int
}

func (w frameWriter) Write(p []byte) (int, error) {
	if err := w.enc.Encode(wire.Frame{FD: w.fd, Data: p}); err != nil {
		return 0, err
	}
	return len(p), nil
}

var errStopped = errors.New("session stopped")
