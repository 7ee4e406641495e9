package remote

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/gate"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/server/api"
	"github.com/cordonhq/cordon/session"
)

// The tenant's gates, runs and staged changes: what `cordon gate`, `cordon audit`,
// `cordon apply` and `cordon discard` do here, done by the server. Each answers the
// documents of the local commands' --json (package gate's and package audit's), so a
// caller prints them as it prints its own.

// Limits of what the runs' answers may be.
const (
	// MaxRunAnswer bounds a run's events (audit show): a log with diffs is bigger
	// than other answers.
	MaxRunAnswer = 64 << 20
	// maxStreamError bounds the error line that may end a follow.
	maxStreamError = 64 << 10
)

// Errors of the gate and run calls: the server has no such one for the tenant (it
// says the same of another tenant's).
var (
	ErrNoRequest = gate.ErrNotFound
	ErrNoRun     = audit.ErrRunNotFound
)

// StageError is an apply or discard the server refused for the run's state, as
// runner's would be here: nothing staged, not finished, or conflicts (the paths
// changed underneath the stage, and what would not have landed anyway). Nothing was
// landed.
type StageError struct {
	Msg                string
	Conflicts, Refused []string
}

func (e *StageError) Error() string { return e.Msg }

// notFound makes a 404 the error missing says.
func notFound(missing error, id string) func(int, api.Error) error {
	return func(st int, _ api.Error) error {
		if st == http.StatusNotFound {
			return fmt.Errorf("%w: %s", missing, id)
		}
		return nil
	}
}

func (c *Client) gateCall(method, id, op string) call {
	p := api.Prefix + "/gates/" + url.PathEscape(id)
	if op != "" {
		p += "/" + op
	}
	return call{method: method, path: p, onError: notFound(ErrNoRequest, id)}
}

func (c *Client) runCall(method, id, op string) call {
	p := api.Prefix + "/runs/" + url.PathEscape(id)
	if op != "" {
		p += "/" + op
	}
	return call{method: method, path: p, onError: notFound(ErrNoRun, id)}
}

// checkID refuses an id no gate request or run can have before it names a path.
func checkID(missing error, id string) error {
	if !validID(id) {
		return fmt.Errorf("%w: %q", missing, id)
	}
	return nil
}

// Gates lists the pending gate requests of the tenant's runs (GET /v1/gates).
func (c *Client) Gates(ctx context.Context) (gate.List, error) {
	var l api.GateList
	err := c.do(ctx, call{method: "GET", path: api.Prefix + "/gates"}, nil, &l)
	return gate.List(l), err
}

// Gate is one pending request (GET /v1/gates/{id}); ErrNoRequest when there is none.
func (c *Client) Gate(ctx context.Context, id string) (gate.Show, error) {
	var s api.GateShow
	if err := checkID(ErrNoRequest, id); err != nil {
		return gate.Show{}, err
	}
	err := c.do(ctx, c.gateCall("GET", id, ""), nil, &s)
	return gate.Show(s), err
}

// Decide approves or denies pending request id (why: the reason a denial gives).
// The server records who decided: the credential's tenant and name.
func (c *Client) Decide(ctx context.Context, id string, deny bool, why string) (api.GateDecision, error) {
	var d api.GateDecision
	if err := checkID(ErrNoRequest, id); err != nil {
		return d, err
	}
	if !deny {
		return d, c.do(ctx, c.gateCall("POST", id, "approve"), nil, &d)
	}
	return d, c.do(ctx, c.gateCall("POST", id, "deny"), api.DenyRequest{Why: why}, &d)
}

// Runs lists the tenant's runs, newest first (GET /v1/runs).
func (c *Client) Runs(ctx context.Context) (audit.Listing, error) {
	var l api.RunList
	err := c.doMax(ctx, call{method: "GET", path: api.Prefix + "/runs"}, nil, &l, MaxRunAnswer)
	return audit.Listing(l), err
}

// Run is a run's events (GET /v1/runs/{id}); ErrNoRun when the tenant has none of
// that id.
func (c *Client) Run(ctx context.Context, id string) (audit.Shown, error) {
	var s api.RunShow
	if err := checkID(ErrNoRun, id); err != nil {
		return audit.Shown{}, err
	}
	err := c.doMax(ctx, c.runCall("GET", id, ""), nil, &s, MaxRunAnswer)
	return audit.Shown(s), err
}

// Verify checks a run's log (GET /v1/runs/{id}/verify). A log that does not verify
// is no error: the answer says so.
func (c *Client) Verify(ctx context.Context, id string) (audit.Verified, error) {
	var v api.RunVerify
	if err := checkID(ErrNoRun, id); err != nil {
		return audit.Verified{}, err
	}
	err := c.do(ctx, c.runCall("GET", id, "verify"), nil, &v)
	return audit.Verified(v), err
}

// ErrNotIntact: an export or follow of a log that does not verify; the error says
// the first bad line.
var ErrNotIntact = errors.New("NOT INTACT")

// Export writes a run's verified log to w in format (api.FormatJSONL or
// api.FormatOCSF): the server verifies it whole first, and refuses one that does not
// verify (ErrNotIntact).
func (c *Client) Export(ctx context.Context, id, format string, w io.Writer) error {
	return c.stream(ctx, id, "export", format, w)
}

// Follow writes a run's lines to w as they are logged, each verified by the server
// first, until its seal: nil then. A line that does not verify, or a run that ended
// unsealed, ends it with ErrNotIntact or the error the server says.
func (c *Client) Follow(ctx context.Context, id, format string, w io.Writer) error {
	return c.stream(ctx, id, "follow", format, w)
}

func (c *Client) stream(ctx context.Context, id, op, format string, w io.Writer) error {
	if err := checkID(ErrNoRun, id); err != nil {
		return err
	}
	cl := c.runCall("GET", id, op)
	cl.path += "?format=" + url.QueryEscape(format)
	inner := cl.onError
	cl.onError = func(st int, e api.Error) error {
		if st == http.StatusConflict {
			return fmt.Errorf("%w: %s", ErrNotIntact, e.Error)
		}
		return inner(st, e)
	}
	resp, err := c.request(ctx, cl, nil, api.NDJSON)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	err = copyLines(w, resp.Body)
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// errorLine is how the line that ends a stream with an error begins: an api.Error,
// which no log line or OCSF event is.
var errorLine = []byte(`{"error":`)

// copyLines copies a stream's lines to w as they come, but for one that is an
// api.Error (read, at most maxStreamError bytes), which is the stream's error.
func copyLines(w io.Writer, r io.Reader) error {
	br := bufio.NewReaderSize(r, 64<<10)
	start := true // at the start of a line
	for {
		frag, err := br.ReadSlice('\n')
		if start && bytes.HasPrefix(frag, errorLine) {
			return streamError(frag, br)
		}
		if len(frag) > 0 {
			if _, werr := w.Write(frag); werr != nil {
				return werr
			}
		}
		start = len(frag) > 0 && frag[len(frag)-1] == '\n'
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF:
			if !start && len(frag) > 0 {
				return &session.Error{Code: errdefs.ExitCannotRun, Msg: "the server's stream ended within a line"}
			}
			return nil
		case err != nil:
			return &session.Error{Code: errdefs.ExitCannotRun, Msg: fmt.Sprintf("reading the server's stream: %v", err)}
		}
	}
}

// streamError reads the error line that begins with first and says what it says.
func streamError(first []byte, br *bufio.Reader) error {
	line := append([]byte(nil), first...)
	rest, _ := io.ReadAll(io.LimitReader(br, maxStreamError))
	line = append(line, rest...)
	var e api.Error
	if json.Unmarshal(bytes.TrimSpace(line), &e) != nil || e.Error == "" {
		return &session.Error{Code: errdefs.ExitCannotRun, Msg: "the server's stream ended with an error it did not say"}
	}
	if msg, ok := cutNotIntact(e.Error); ok {
		return fmt.Errorf("%w: %s", ErrNotIntact, msg)
	}
	return &session.Error{Code: errdefs.ExitFailure, Msg: e.Error}
}

// cutNotIntact is the problem of the server's "RUN: NOT INTACT: PROBLEM".
func cutNotIntact(msg string) (string, bool) {
	_, after, ok := strings.Cut(msg, ": NOT INTACT: ")
	return after, ok
}

// Apply lands a staged run's changes on its workspace (POST /v1/runs/{id}/apply):
// those at or below paths, or all; force lands over conflicts. A refusal for the
// run's state is a *StageError.
func (c *Client) Apply(ctx context.Context, id string, paths []string, force bool) (api.StageResult, error) {
	var res api.StageResult
	if err := checkID(ErrNoRun, id); err != nil {
		return res, err
	}
	cl := c.runCall("POST", id, "apply")
	cl.onError = stageError(cl.onError)
	return res, c.do(ctx, cl, api.ApplyRequest{Paths: paths, Force: force}, &res)
}

// Discard drops a staged run's changes (POST /v1/runs/{id}/discard).
func (c *Client) Discard(ctx context.Context, id string) (api.StageResult, error) {
	var res api.StageResult
	if err := checkID(ErrNoRun, id); err != nil {
		return res, err
	}
	cl := c.runCall("POST", id, "discard")
	cl.onError = stageError(cl.onError)
	return res, c.do(ctx, cl, nil, &res)
}

func stageError(inner func(int, api.Error) error) func(int, api.Error) error {
	return func(st int, e api.Error) error {
		if st == http.StatusConflict {
			return &StageError{Msg: e.Error, Conflicts: e.Conflicts, Refused: e.Refused}
		}
		return inner(st, e)
	}
}

// Prune removes the tenant's sealed, intact runs as `cordon audit prune` does
// (POST /v1/runs/prune).
func (c *Client) Prune(ctx context.Context, req api.PruneRequest) (api.PruneResult, error) {
	var res api.PruneResult
	return res, c.do(ctx, call{method: "POST", path: api.Prefix + "/runs/prune"}, req, &res)
}
