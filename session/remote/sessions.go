package remote

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/server/api"
	"github.com/cordonhq/cordon/session"
	"github.com/cordonhq/cordon/session/wire"
)

// Session is a handle on one of the tenant's sessions on the server. It holds no
// connection, so it may be used from several goroutines.
type Session struct {
	c    *Client
	info api.Session
}

// Start starts a session (POST /v1/sessions) and returns it.
func (c *Client) Start(ctx context.Context, req api.StartRequest) (*Session, error) {
	var s api.Session
	if err := c.do(ctx, call{method: "POST", path: api.Prefix + "/sessions"}, req, &s); err != nil {
		return nil, err
	}
	if !validID(s.ID) {
		return nil, &session.Error{Code: errdefs.ExitCannotRun, Msg: fmt.Sprintf("server %s: a session id %q", c.host, s.ID)}
	}
	return &Session{c: c, info: s}, nil
}

// List lists the tenant's sessions (GET /v1/sessions).
func (c *Client) List(ctx context.Context) ([]api.Session, error) {
	var l api.SessionList
	if err := c.do(ctx, call{method: "GET", path: api.Prefix + "/sessions"}, nil, &l); err != nil {
		return nil, err
	}
	return l.Sessions, nil
}

// Open finds session id (GET /v1/sessions/{id}): session.ErrNoSession when the tenant
// has none of that id.
func (c *Client) Open(ctx context.Context, id string) (*Session, error) {
	if !validID(id) {
		return nil, fmt.Errorf("%w %q", session.ErrNoSession, id)
	}
	s := &Session{c: c, info: api.Session{ID: id}}
	if err := c.do(ctx, s.call("GET", ""), nil, &s.info); err != nil {
		return nil, err
	}
	return s, nil
}

// Handle is a handle on session id without asking the server whether it exists:
// the first request says so.
func (c *Client) Handle(id string) (*Session, error) {
	if !validID(id) {
		return nil, fmt.Errorf("%w %q", session.ErrNoSession, id)
	}
	return &Session{c: c, info: api.Session{ID: id}}, nil
}

// validID is what a session id may be, as the local client has it: no path
// separator, no dot, nothing that is not printable.
func validID(id string) bool {
	return id != "" && len(id) <= 128 && !strings.ContainsAny(id, "/.\\%") && isPrintable(id)
}

// ID is the session's id.
func (s *Session) ID() string { return s.info.ID }

// Info is what the server said of the session when it was started or opened.
func (s *Session) Info() api.Session { return s.info }

// call is the route /v1/sessions/{id}/op ("" for the session itself).
func (s *Session) call(method, op string) call {
	p := api.Prefix + "/sessions/" + url.PathEscape(s.info.ID)
	if op != "" {
		p += "/" + op
	}
	return call{method: method, path: p, id: s.info.ID}
}

// Exec runs argv in the session, as session.Session.Exec does: output is written to
// o.Stdout and o.Stderr as the server streams it, and the result comes last. A
// command that ran is never an error. o.Stdin is read whole first (the request
// carries it, within the server's 1 MiB body limit). Cancelling ctx ends the request,
// and the server ends the command.
func (s *Session) Exec(ctx context.Context, argv []string, o session.ExecOptions) (*wire.Result, error) {
	req := api.ExecRequest{Argv: argv, Dir: o.Dir, TimeoutMS: o.Timeout.Milliseconds(), Cap: o.Cap}
	if o.Stdin != nil {
		data, err := io.ReadAll(io.LimitReader(o.Stdin, maxBody+1))
		if err != nil {
			return nil, &session.Error{Code: errdefs.ExitCannotRun, Msg: fmt.Sprintf("reading stdin: %v", err)}
		}
		if len(data) > maxBody {
			return nil, &session.Error{Code: errdefs.ExitUsage, Msg: fmt.Sprintf("stdin is over %d bytes, the most a server takes (it is sent whole)", maxBody)}
		}
		req.Stdin = data
	}
	resp, err := s.c.request(ctx, s.call("POST", "exec"), req, api.NDJSON)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	res, err := session.ReadExec(ctx, resp.Body, s.info.ID, o)
	if err == nil {
		drainStream(resp.Body)
	}
	return res, err
}

// Bounds of reading an exec stream's end after its result.
const (
	drainMax  = 64 << 10
	drainWait = time.Second
)

// drainStream reads what follows an exec's result, the end of the stream (the server
// sends nothing more), so that the connection goes back to the client's pool rather
// than being closed: the next request then costs no TLS handshake. Bounded: at most
// drainMax bytes, and the body is closed after drainWait.
func drainStream(body io.ReadCloser) {
	t := time.AfterFunc(drainWait, func() { body.Close() })
	defer t.Stop()
	_, _ = io.CopyN(io.Discard, body, drainMax)
}

// Sweep ends an agent's turn, as session.Session.Sweep does.
func (s *Session) Sweep(ctx context.Context) (session.Turn, error) {
	var a api.Sweep
	err := s.c.do(ctx, s.call("POST", "sweep"), nil, &a)
	return session.Turn{Removed: a.Removed, Changed: a.Changed, More: a.More}, err
}

// Checkpoint keeps a staged session's workspace as it is now, as
// session.Session.Checkpoint does.
func (s *Session) Checkpoint(ctx context.Context, name string) (wire.Checkpoint, []string, error) {
	var a api.CheckpointResponse
	if err := s.c.do(ctx, s.call("POST", "checkpoint"), api.CheckpointRequest{Name: name}, &a); err != nil {
		return wire.Checkpoint{}, nil, err
	}
	return a.Checkpoint, a.Problems, nil
}

// Rollback makes a staged session's workspace what it was at checkpoint to, as
// session.Session.Rollback does.
func (s *Session) Rollback(ctx context.Context, to string) (wire.Checkpoint, []string, []string, error) {
	var a api.RollbackResponse
	if err := s.c.do(ctx, s.call("POST", "rollback"), api.RollbackRequest{To: to}, &a); err != nil {
		return wire.Checkpoint{}, nil, nil, err
	}
	return a.Checkpoint, a.Changed, a.Problems, nil
}

// Stop stops the session, as session.Session.Stop does, and returns once the server
// says it is stopped.
func (s *Session) Stop(ctx context.Context) error {
	var a api.Session
	return s.c.do(ctx, s.call("POST", "stop"), nil, &a)
}
