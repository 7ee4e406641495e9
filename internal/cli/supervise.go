package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cordonhq/cordon/client"
	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/owner"
	"github.com/cordonhq/cordon/runner"
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

// superviseCmd is `cordon internal supervise`: it keeps one session (one run) open and
// serves its socket until stopped, a SIGTERM/SIGINT (both tear down like stop), its
// sandbox's end, or death (kill -9: process 1 loses its control channel and kills
// everything in the sandbox; cordon gc removes the rest).
func superviseCmd(ctx context.Context, stdio IO, args []string) error {
	fs := newFlags("internal supervise", "internal supervise --ready-fd N --log FILE [-c FILE] [--backend B] [--audit-dir DIR]", stdio.Stderr)
	file := contractFlag(fs)
	backend := fs.String("backend", "auto", "sandbox `backend`")
	auditDir := fs.String("audit-dir", "", "audit root `DIR`")
	gates := gatesFlag(fs)
	readyFD := fs.Int("ready-fd", -1, "report readiness on this `fd`")
	logPath := fs.String("log", "", "this process's log `FILE`, renamed to ID.log")
	if err := parse(fs, args); err != nil {
		return err
	}
	ready := os.NewFile(uintptr(*readyFD), "ready")
	fail := func(err error) error {
		if ready != nil {
			fmt.Fprintf(ready, "error %s\n", strings.ReplaceAll(errdefs.Message(err), "\n", "; "))
			ready.Close()
		}
		if *logPath != "" {
			os.Remove(*logPath)
		}
		return errdefs.CannotRun(err)
	}
	linux.Umask(0o077)
	ctx, stopSignals := withSignals(ctx)
	defer stopSignals()
	root, err := auditRoot(*auditDir)
	if err != nil {
		return fail(err)
	}
	plan, _, err := planOf(*file, root, nil)
	if err != nil {
		return fail(err)
	}
	b, err := selectBackend(ctx, *backend, plan)
	if err != nil {
		return fail(err)
	}
	log := slog.New(slog.NewTextHandler(stdio.Stderr, nil))
	sess, err := runner.StartSession(ctx, plan, runner.Options{
		Gates:   *gates,
		Backend: b, AuditRoot: root, Version: Version, Secrets: scrubbedSecrets(plan), Log: log,
		Stderr: stdio.Stderr,
	})
	if err != nil {
		return fail(err)
	}
	dir := runner.SessionsDir(runner.DefaultRunRoot())
	ln, sock, cleanup, err := publishSession(sess, plan, b.Name(), dir)
	if err != nil {
		_ = sess.Close(ctx)
		return fail(errdefs.Unavailablef("session socket: %w", err))
	}
	if *logPath != "" {
		_ = os.Rename(*logPath, filepath.Join(dir, sess.ID()+".log"))
	}
	fmt.Fprintf(ready, "ok %s\n", sess.ID())
	ready.Close()
	log.Info("session ready", "id", sess.ID(), "socket", sock)
	err = superviseUntilStop(ctx, sess, ln, sock)
	cleanup()
	log.Info("session stopped", "id", sess.ID(), "err", err)
	return errdefs.CannotRun(err)
}

// superviseUntilStop serves the session's socket until a stop request, a signal or the
// sandbox's end, then tears the session down and answers the stop request.
func superviseUntilStop(ctx context.Context, sess *runner.Session, ln net.Listener, sock string) error {
	// execCtx ends every running command: on stop and on a signal.
	execCtx, cancelExecs := context.WithCancelCause(ctx)
	defer cancelExecs(nil)
	stopConn := serveUntilStop(ctx, execCtx, sess, ln)
	ln.Close()
	os.Remove(sock) // no new connections
	cancelExecs(errStopped)
	err := sess.Close(ctx)
	if stopConn != nil {
		f := client.Frame{Done: true}
		if err != nil {
			f = errFrame(err)
		}
		_ = json.NewEncoder(stopConn).Encode(f)
		stopConn.Close()
	}
	return err
}

// publishSession listens on the session's socket (0600) in dir and writes its ID.json,
// both under the session id; cleanup removes them and the log.
func publishSession(sess *runner.Session, plan *contract.Plan, backend, dir string) (net.Listener, string, func(), error) {
	id := sess.ID()
	sock, info := filepath.Join(dir, id+".sock"), filepath.Join(dir, id+".json")
	cleanup := func() {
		os.Remove(sock)
		os.Remove(info)
		os.Remove(filepath.Join(dir, id+".log"))
	}
	ln, err := net.Listen("unix", sock)
	if err == nil {
		err = os.Chmod(sock, 0o600)
	}
	if err == nil {
		si := client.Info{ID: id, Process: owner.Self(), Started: time.Now().UTC(),
			Contract: plan.ContractFile, Backend: backend, Workspace: plan.Workspace, AuditDir: sess.AuditDir()}
		data, _ := json.Marshal(si)
		tmp := info + ".tmp"
		if err = os.WriteFile(tmp, data, 0o600); err == nil {
			err = os.Rename(tmp, info)
		}
	}
	if err != nil {
		if ln != nil {
			ln.Close()
		}
		cleanup()
		return nil, "", nil, err
	}
	return ln, sock, cleanup, nil
}

// serveUntilStop serves connections until a stop request (whose connection it returns,
// to be answered after teardown) or until ctx ends (a signal: nil).
func serveUntilStop(ctx, execCtx context.Context, sess *runner.Session, ln net.Listener) net.Conn {
	stopped := make(chan net.Conn, 1)
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveConn(execCtx, sess, c, stopped)
		}
	}()
	select {
	case c := <-stopped:
		return c
	case <-ctx.Done():
		return nil
	case <-sess.Done(): // the sandbox ended on its own: tear down and say why
		return nil
	}
}

// serveConn answers one request.
func serveConn(ctx context.Context, sess *runner.Session, c net.Conn, stopped chan<- net.Conn) {
	br := bufio.NewReader(c)
	line, err := br.ReadBytes('\n')
	var req client.Request
	if err == nil {
		err = json.Unmarshal(line, &req)
	}
	enc := &lockedEncoder{enc: json.NewEncoder(c)}
	if err != nil {
		_ = enc.Encode(errFrame(errdefs.Usagef("bad request: %w", err)))
		c.Close()
		return
	}
	switch req.Op {
	case "stop":
		select {
		case stopped <- c:
		default:
			_ = enc.Encode(client.Frame{Done: true}) // already stopping
			c.Close()
		}
		return
	case "sweep":
		turn, err := sess.Sweep()
		f := client.Frame{Done: true, Removed: turn.Removed, Changed: turn.Changed}
		if err != nil {
			f = errFrame(err)
		}
		_ = enc.Encode(f)
		c.Close()
		return
	case "exec":
		defer c.Close()
		serveExec(ctx, sess, req, br, enc)
	default:
		_ = enc.Encode(errFrame(errdefs.Usagef("unknown op %q", req.Op)))
		c.Close()
	}
}

// serveExec runs one exec request and answers with its output chunks and result. The
// client going away (cordon exec interrupted) ends the command.
func serveExec(ctx context.Context, sess *runner.Session, req client.Request, br *bufio.Reader, enc *lockedEncoder) {
	if req.Cap < 0 || req.TimeoutMS < 0 {
		_ = enc.Encode(errFrame(errdefs.Usagef("cap and timeout_ms must not be negative")))
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
	_ = enc.Encode(client.Frame{Result: &client.Result{
		V: client.ResultVersion, Session: sess.ID(), Cmd: res.CmdID, ExitCode: res.ExitCode,
		Truncated: res.Output[0].Truncated || res.Output[1].Truncated,
		SpillPath: res.Output[0].SpillPath, StderrSpillPath: res.Output[1].SpillPath,
		DurationMS: res.Duration.Milliseconds(), TimedOut: res.TimedOut, Reason: res.Reason,
		Diffstat:     client.Diffstat{Files: res.FilesChanged, Insertions: res.Insertions, Deletions: res.Deletions},
		DeniedEgress: res.DeniedEgress,
	}})
}

// errFrame answers a request with err: its message and the status `cordon exec` exits
// with (125 unless err carries another).
func errFrame(err error) client.Frame {
	err = errdefs.CannotRun(err)
	return client.Frame{Error: errdefs.Message(err), Code: errdefs.ExitCode(err)}
}

// readInput copies Input lines to w until EOF is sent; a client that hangs up first
// is an error.
func readInput(br *bufio.Reader, w io.Writer) error {
	dec := json.NewDecoder(br)
	for {
		var in client.Input
		if err := dec.Decode(&in); err != nil {
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
