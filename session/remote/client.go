package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/server/api"
	"github.com/cordonhq/cordon/session"
)

// call is one request: its route, its path with the ids filled in, and the session
// id when the path names one (a 404 then means no such session).
type call struct {
	method, path string
	id           string
	// onError, when set, is first asked what a non-2xx answer means: nil leaves it
	// to the usual reading (a run's or a gate's 404, an apply's 409).
	onError func(status int, e api.Error) error
}

// request sends in (nil: no body) to c's server and returns the answer, whose status
// is 2xx with the Content-Type want; any other answer is the error it says.
func (c *Client) request(ctx context.Context, cl call, in any, want string) (*http.Response, error) {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		if len(data) > maxBody {
			return nil, &session.Error{Code: errdefs.ExitUsage, Msg: fmt.Sprintf("%s: the request is %d bytes, over the server's limit of %d (stdin is sent whole)", cl.path, len(data), maxBody)}
		}
		body = bytes.NewReader(data)
	}
	ctype := ""
	if in != nil {
		ctype = api.JSON
	}
	return c.send(ctx, cl, body, ctype, want)
}

// send sends body (nil: none) of media type ctype to c's server and returns the
// answer, as request does.
func (c *Client) send(ctx context.Context, cl call, body io.Reader, ctype, want string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, cl.method, c.base+cl.path, body)
	if err != nil {
		return nil, err
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	req.Header.Set("Accept", want)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &session.Error{Code: errdefs.ExitCannotRun, Msg: fmt.Sprintf("server %s: %v", c.host, unwrapURL(err))}
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, c.answerError(cl, resp)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != want {
		resp.Body.Close()
		return nil, &session.Error{Code: errdefs.ExitCannotRun, Msg: fmt.Sprintf("server %s: %s %s answered %q, not %s", c.host, cl.method, cl.path, mt, want)}
	}
	return resp, nil
}

// do sends in and decodes the JSON answer, at most MaxAnswer bytes, into out.
func (c *Client) do(ctx context.Context, cl call, in, out any) error {
	return c.doMax(ctx, cl, in, out, MaxAnswer)
}

// doMax is do with an answer of at most max bytes.
func (c *Client) doMax(ctx context.Context, cl call, in, out any, max int64) error {
	resp, err := c.request(ctx, cl, in, api.JSON)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := readAtMost(resp.Body, max)
	if err == nil {
		err = json.Unmarshal(data, out)
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &session.Error{Code: errdefs.ExitCannotRun, Msg: fmt.Sprintf("server %s: the answer to %s %s: %v", c.host, cl.method, cl.path, err)}
	}
	return nil
}

// readAnswer reads a whole answer of at most MaxAnswer bytes.
func readAnswer(r io.Reader) ([]byte, error) { return readAtMost(r, MaxAnswer) }

func readAtMost(r io.Reader, max int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err == nil && int64(len(data)) > max {
		err = fmt.Errorf("over %d bytes", max)
	}
	return data, err
}

// answerError is the error a non-2xx answer says, as a *session.Error with the exit
// status cordon gives it locally: 2 for a request the server found bad, 125 for what
// it would not or could not do, session.ErrNoSession for an unknown session.
func (c *Client) answerError(cl call, resp *http.Response) error {
	var e api.Error
	data, _ := readAnswer(resp.Body)
	if json.Unmarshal(data, &e) != nil || e.Error == "" {
		e.Error = strings.TrimSpace(http.StatusText(resp.StatusCode))
	}
	if cl.onError != nil {
		if err := cl.onError(resp.StatusCode, e); err != nil {
			return err
		}
	}
	msg := fmt.Sprintf("server %s: %s", c.host, e.Error)
	switch st := resp.StatusCode; {
	case st == http.StatusNotFound && cl.id != "":
		return fmt.Errorf("%w %s (cordon session ls)", session.ErrNoSession, cl.id)
	case st == http.StatusUnauthorized:
		return &session.Error{Code: errdefs.ExitCannotRun, Msg: fmt.Sprintf("server %s refused the credential (401 unauthorized): check $CORDON_TOKEN or --token-file, or the client certificate", c.host)}
	case st == http.StatusForbidden:
		return &session.Error{Code: errdefs.ExitCannotRun, Msg: msg + " (403 forbidden)"}
	case st == http.StatusTooManyRequests:
		after := retryAfter(resp.Header.Get("Retry-After"), time.Now())
		msg = fmt.Sprintf("server %s: over the tenant's %s quota: %s", c.host, orWord(e.Quota, "a"), e.Error)
		if after > 0 {
			msg += fmt.Sprintf("; retry after %s", after)
		}
		return &session.Error{Code: errdefs.ExitCannotRun, Msg: msg, Quota: e.Quota, RetryAfter: after}
	case st == http.StatusNotFound, st == http.StatusMethodNotAllowed, st == http.StatusNotImplemented:
		return &session.Error{Code: errdefs.ExitCannotRun, Msg: fmt.Sprintf("%s (%d: the server does not serve %s %s)", msg, st, cl.method, cl.path)}
	case st == http.StatusBadRequest, st == http.StatusRequestEntityTooLarge, st == http.StatusUnsupportedMediaType, st == http.StatusUnprocessableEntity:
		return &session.Error{Code: errdefs.ExitUsage, Msg: msg}
	}
	return &session.Error{Code: errdefs.ExitCannotRun, Msg: fmt.Sprintf("%s (%d)", msg, resp.StatusCode)}
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date. 0 when it has none
// (or none that makes sense).
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 32); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now).Round(time.Second)
	}
	return 0
}

func orWord(s, word string) string {
	if s == "" {
		return word
	}
	return s
}

// unwrapURL drops net/http's `Post "URL": ` from a transport error: the message
// names the server already.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
