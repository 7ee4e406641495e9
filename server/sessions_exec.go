package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/server/api"
	"github.com/cordonhq/cordon/server/auth"
	"github.com/cordonhq/cordon/session"
	"github.com/cordonhq/cordon/session/wire"
)

// Bounds of an exec's stream. Its connection's deadlines are lifted from the server's
// for the command's timeout (or maxExecTimeout when the request leaves the contract's
// in force) plus streamMargin, for the teardown and the result. execMargin is the
// margin of the server's own steps (a start, a stop, a clone) past their fixed bounds.
const (
	maxExecTimeout = 24 * time.Hour
	execMargin     = time.Minute
	maxArgv        = 4096
	// minStreamMargin is the least time a command's teardown and result get past its
	// timeout, however short the response timeout: a timed-out command's kill and
	// diff walk are the server's work, and its result must not be cut off.
	minStreamMargin = 10 * time.Second
)

// streamMargin is how long past a command's timeout an exec's stream, or an MCP call,
// is held for the teardown and the result: the response timeout
// (listen.timeouts.response, a minute by default), at least minStreamMargin.
func (s *Server) streamMargin() time.Duration { return max(s.timeouts.Response, minStreamMargin) }

// execSession runs a command in the session and streams its output as NDJSON
// session/wire.Frame lines, each flushed as it comes, then the result or the error
// frame. The client going away, or a write to it failing, ends the command.
func (s *Server) execSession(w http.ResponseWriter, r *http.Request, id auth.Identity) {
	var req api.ExecRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	if err := validateExec(req); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	sess, rec, ok := s.openRecord(w, r, id)
	if !ok {
		return
	}
	if err := execTimeoutFits(req.TimeoutMS, rec.TimeoutMS); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	timeout := time.Duration(req.TimeoutMS) * time.Millisecond
	bound := timeout
	if bound == 0 {
		bound = maxExecTimeout
	}
	// The request is read: the read deadline now only ends the wait for the client to
	// go away, which is how a disconnect cancels the command.
	rc, ok := extendDeadlines(w, bound+s.streamMargin())
	if !ok {
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	w.Header().Set("Content-Type", api.NDJSON)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	fw := &frameWriter{enc: json.NewEncoder(w), rc: rc, cancel: cancel}
	o := session.ExecOptions{Dir: req.Dir, Timeout: timeout, Cap: req.Cap,
		Stdout: fdWriter{fw, 1}, Stderr: fdWriter{fw, 2}}
	if req.Stdin != nil {
		o.Stdin = bytes.NewReader(req.Stdin)
	}
	start := time.Now()
	res, err := sess.Exec(ctx, req.Argv, o)
	if err != nil {
		s.metrics.exec(id.Tenant, nil, r.Context().Err() != nil || fw.failed(), time.Since(start))
	} else {
		s.metrics.exec(id.Tenant, res, false, time.Since(start))
	}
	switch {
	case err != nil:
		fw.write(errFrame(err))
	default:
		res.Stdout, res.Stderr = "", "" // streamed already: the client fills them in
		fw.write(wire.Frame{Result: res})
	}
}

// extendDeadlines lifts the server's deadlines on the request's connection for a
// response that takes up to d (an exec's stream, a start, a stop), or for good when d
// is 0, or answers 500.
func extendDeadlines(w http.ResponseWriter, d time.Duration) (*http.ResponseController, bool) {
	rc := http.NewResponseController(w)
	var deadline time.Time // none
	if d > 0 {
		deadline = time.Now().Add(d)
	}
	if err := errors.Join(rc.SetWriteDeadline(deadline), rc.SetReadDeadline(deadline)); err != nil {
		writeError(w, http.StatusInternalServerError, "lifting the response's deadline: "+err.Error())
		return nil, false
	}
	return rc, true
}

// validateExec checks an exec request before the session is asked.
func validateExec(req api.ExecRequest) error {
	switch {
	case len(req.Argv) == 0 || req.Argv[0] == "":
		return errors.New("argv: want the command and its arguments")
	case len(req.Argv) > maxArgv:
		return errors.New("argv: too many arguments")
	case req.TimeoutMS < 0 || req.TimeoutMS > maxExecTimeout.Milliseconds(): // compared as ms: no product to overflow
		return errors.New("timeout_ms: want 0 (the contract's) up to 24 hours")
	case req.Cap < 0 || req.Cap > wire.MaxCap:
		return fmt.Errorf("cap: want 0 (no cap) up to %d characters", wire.MaxCap)
	}
	return nil
}

// execTimeoutFits checks an exec's timeout_ms against the session contract's
// per-command timeout (ms): an exec may shorten it, never lengthen it, since the
// contract, admitted against the tenant's base, is what bounds a command. (The CLI's
// --timeout may lengthen it: there the caller is the host's own user.)
func execTimeoutFits(asked, contract int64) error {
	if asked == 0 || asked <= contract {
		return nil
	}
	if contract == 0 {
		return errors.New("timeout_ms: this session's record names no timeout to shorten: leave it 0 (the contract's)")
	}
	return fmt.Errorf("timeout_ms: %d is past the session contract's commands.timeout (%s): an exec may only shorten it", asked, time.Duration(contract)*time.Millisecond)
}

// errFrame is the last frame of an exec cordon could not run.
func errFrame(err error) wire.Frame {
	var se *session.Error
	if errors.As(err, &se) {
		return wire.Frame{Error: se.Msg, Code: se.ExitStatus()}
	}
	return wire.Frame{Error: err.Error(), Code: errdefs.ExitCannotRun}
}

// frameWriter writes frames to the stream, each flushed; after the first failure it
// writes nothing more and ends the command.
type frameWriter struct {
	mu     sync.Mutex // mu guards enc and err.
	enc    *json.Encoder
	rc     *http.ResponseController
	err    error
	cancel context.CancelFunc
}

func (fw *frameWriter) write(f wire.Frame) error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if fw.err != nil {
		return fw.err
	}
	fw.err = fw.enc.Encode(f)
	if fw.err == nil {
		fw.err = fw.rc.Flush()
	}
	if fw.err != nil {
		fw.cancel()
	}
	return fw.err
}

// failed reports whether a write to the client failed (it went away).
func (fw *frameWriter) failed() bool {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return fw.err != nil
}

// fdWriter is an exec's stdout or stderr: each write is one frame.
type fdWriter struct {
	fw *frameWriter
	fd int
}

func (w fdWriter) Write(p []byte) (int, error) {
	if err := w.fw.write(wire.Frame{FD: w.fd, Data: p}); err != nil {
		return 0, err
	}
	return len(p), nil
}

var _ io.Writer = fdWriter{}
