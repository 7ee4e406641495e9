package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/server/api"
	"github.com/cordonhq/cordon/session"
	"github.com/cordonhq/cordon/session/wire"
	"sync/atomic"
)

const testToken = "tok-3f8b0123456789"

// serveTLS serves f over TLS and returns a client of it that trusts its certificate
// through a CA file, with the token.
func serveTLS(t *testing.T, f *fakeServer) *Client {
	t.Helper()
	ts := httptest.NewTLSServer(f.handler())
	t.Cleanup(ts.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Dial(ts.URL, Token(testToken), CA(ca))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestSessionOperations: every operation sends its route of the table, with its body
// as the server decodes it, and returns what the server answered.
func TestSessionOperations(t *testing.T) {
	started := time.Date(2026, 12, 5, 7, 0, 0, 0, time.UTC)
	sess := api.Session{ID: "s1", State: "running", Started: started, Backend: "bwrap", Workspace: "ws", Stage: true}
	var bodies []any
	f := &fakeServer{t: t, token: testToken}
	f.answer = func(w http.ResponseWriter, r *http.Request, rt api.Route, body any) {
		bodies = append(bodies, body)
		switch rt.Method + " " + rt.Path {
		case "POST /v1/sessions", "GET /v1/sessions/{id}", "POST /v1/sessions/{id}/stop":
			writeAPIJSON(w, 200, sess)
		case "GET /v1/sessions":
			writeAPIJSON(w, 200, api.SessionList{Sessions: []api.Session{sess}})
		case "POST /v1/sessions/{id}/sweep":
			writeAPIJSON(w, 200, api.Sweep{Removed: 2, Changed: []string{"a.go"}})
		case "POST /v1/sessions/{id}/checkpoint":
			writeAPIJSON(w, 200, api.CheckpointResponse{Checkpoint: wire.Checkpoint{N: 3, Name: "x", Copied: 1}, Problems: []string{"p"}})
		case "POST /v1/sessions/{id}/rollback":
			writeAPIJSON(w, 200, api.RollbackResponse{Checkpoint: wire.Checkpoint{N: 3}, Changed: []string{"b.go"}})
		default:
			t.Errorf("unexpected %s %s", rt.Method, rt.Path)
		}
	}
	c := serveTLS(t, f)
	ctx := context.Background()
	start := api.StartRequest{Contract: "version: 1\n", Workspace: "ws", Backend: "bwrap", Stage: true}
	s, err := c.Start(ctx, start)
	if err != nil || s.ID() != "s1" || s.Info() != sess {
		t.Fatalf("Start: %+v, %v", s, err)
	}
	list, err := c.List(ctx)
	if err != nil || len(list) != 1 || list[0] != sess {
		t.Fatalf("List: %+v, %v", list, err)
	}
	if s, err = c.Open(ctx, "s1"); err != nil || s.Info() != sess {
		t.Fatalf("Open: %+v, %v", s, err)
	}
	turn, err := s.Sweep(ctx)
	if err != nil || turn.Removed != 2 || !slices.Equal(turn.Changed, []string{"a.go"}) {
		t.Fatalf("Sweep: %+v, %v", turn, err)
	}
	cp, problems, err := s.Checkpoint(ctx, "x")
	if err != nil || cp.N != 3 || cp.Name != "x" || !slices.Equal(problems, []string{"p"}) {
		t.Fatalf("Checkpoint: %+v %q, %v", cp, problems, err)
	}
	cp, changed, _, err := s.Rollback(ctx, "-1")
	if err != nil || cp.N != 3 || !slices.Equal(changed, []string{"b.go"}) {
		t.Fatalf("Rollback: %+v %q, %v", cp, changed, err)
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	want := []string{"POST /v1/sessions", "GET /v1/sessions", "GET /v1/sessions/s1", "POST /v1/sessions/s1/sweep",
		"POST /v1/sessions/s1/checkpoint", "POST /v1/sessions/s1/rollback", "POST /v1/sessions/s1/stop"}
	if got := f.requests(); !slices.Equal(got, want) {
		t.Errorf("requests %q; want %q", got, want)
	}
	wantBodies := []any{start, nil, nil, nil, api.CheckpointRequest{Name: "x"}, api.RollbackRequest{To: "-1"}, nil}
	for i := range wantBodies {
		if i < len(bodies) && !equalJSON(bodies[i], wantBodies[i]) {
			t.Errorf("body %d: %+v; want %+v", i, bodies[i], wantBodies[i])
		}
	}
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// signalWriter records what it is written and signals each write.
type signalWriter struct {
	buf   bytes.Buffer
	wrote chan struct{}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.buf.Write(p)
	if w.wrote != nil {
		w.wrote <- struct{}{}
	}
	return len(p), nil
}

// TestExecStreams: output reaches the writers while the command still runs (the
// server sends the result only after the client has written the first chunk), the
// result comes last, and the request carries argv, dir, timeout, cap and stdin.
func TestExecStreams(t *testing.T) {
	out := &signalWriter{wrote: make(chan struct{}, 1)}
	f := &fakeServer{t: t, token: testToken}
	f.answer = func(w http.ResponseWriter, r *http.Request, rt api.Route, body any) {
		req := body.(api.ExecRequest)
		if !slices.Equal(req.Argv, []string{"sh", "-c", "x"}) || req.Dir != "/w" || req.TimeoutMS != 1500 || req.Cap != 10 || string(req.Stdin) != "in put" {
			t.Errorf("exec request %+v", req)
		}
		w.Header().Set("Content-Type", api.NDJSON)
		enc := json.NewEncoder(w)
		_ = enc.Encode(wire.Frame{FD: 1, Data: []byte("first ")})
		w.(http.Flusher).Flush()
		if wait := out.wrote; wait != nil {
			select {
			case <-wait:
			case <-time.After(10 * time.Second):
				t.Error("the first chunk did not reach the writer before the result was sent")
			}
		}
		_ = enc.Encode(wire.Frame{FD: 2, Data: []byte("err")})
		_ = enc.Encode(wire.Frame{FD: 1, Data: []byte("second")})
		_ = enc.Encode(wire.Frame{Result: &wire.Result{V: 1, Session: "s1", ExitCode: 3}})
	}
	c := serveTLS(t, f)
	s, _ := c.Handle("s1")
	var errOut bytes.Buffer
	res, err := s.Exec(context.Background(), []string{"sh", "-c", "x"}, session.ExecOptions{
		Dir: "/w", Timeout: 1500 * time.Millisecond, Cap: 10, Stdin: strings.NewReader("in put"), Stdout: out, Stderr: &errOut})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 || out.buf.String() != "first second" || errOut.String() != "err" || res.Denied == nil {
		t.Errorf("result %+v, stdout %q, stderr %q", res, out.buf.String(), errOut.String())
	}
	// Without writers, the output is in the result, as locally.
	out.wrote = nil
	res, err = s.Exec(context.Background(), []string{"sh", "-c", "x"}, session.ExecOptions{Dir: "/w", Timeout: 1500 * time.Millisecond, Cap: 10, Stdin: strings.NewReader("in put")})
	if err != nil || res.Stdout != "first second" || res.Stderr != "err" {
		t.Errorf("buffered: %+v, %v", res, err)
	}
}

// TestExecErrorFrame: an error frame is a *session.Error with its code.
func TestExecErrorFrame(t *testing.T) {
	f := &fakeServer{t: t, token: testToken}
	f.answer = func(w http.ResponseWriter, r *http.Request, rt api.Route, body any) {
		w.Header().Set("Content-Type", api.NDJSON)
		_ = json.NewEncoder(w).Encode(wire.Frame{Error: "no such directory", Code: 2})
	}
	s, _ := serveTLS(t, f).Handle("s1")
	_, err := s.Exec(context.Background(), []string{"true"}, session.ExecOptions{})
	var se *session.Error
	if !errors.As(err, &se) || se.Code != 2 || se.Msg != "no such directory" {
		t.Errorf("Exec: %#v", err)
	}
}

// TestAnswerErrors: each error status becomes the error cordon reports locally, with
// its exit status.
func TestAnswerErrors(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		body    api.Error
		header  string
		code    int
		noSess  bool
		contain []string
	}{
		{"unauthorized", 401, api.Error{Error: "unauthorized"}, "", errdefs.ExitCannotRun, false, []string{"refused the credential", "CORDON_TOKEN"}},
		{"forbidden", 403, api.Error{Error: "this credential does not have the agent role"}, "", errdefs.ExitCannotRun, false, []string{"agent role", "403"}},
		{"not found", 404, api.Error{Error: "no such session"}, "", 0, true, []string{"no such session s1"}},
		{"quota", 429, api.Error{Error: "10 sessions running", Quota: "sessions"}, "7", errdefs.ExitCannotRun, false, []string{"sessions quota", "10 sessions running", "retry after 7s"}},
		{"bad request", 400, api.Error{Error: "invalid request body"}, "", errdefs.ExitUsage, false, []string{"invalid request body"}},
		{"not served", 501, api.Error{Error: "not served yet"}, "", errdefs.ExitCannotRun, false, []string{"not served yet", "does not serve POST /v1/sessions/s1/sweep"}},
		{"server error", 500, api.Error{}, "", errdefs.ExitCannotRun, false, []string{"Internal Server Error", "(500)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeServer{t: t, token: testToken}
			f.answer = func(w http.ResponseWriter, r *http.Request, rt api.Route, body any) {
				if tt.header != "" {
					w.Header().Set("Retry-After", tt.header)
				}
				if tt.body.Error == "" {
					w.WriteHeader(tt.status)
					return
				}
				writeAPIJSON(w, tt.status, tt.body)
			}
			s, _ := serveTLS(t, f).Handle("s1")
			_, err := s.Sweep(context.Background())
			if err == nil {
				t.Fatal("no error")
			}
			if tt.noSess != errors.Is(err, session.ErrNoSession) {
				t.Errorf("errors.Is(%v, ErrNoSession) = %v", err, !tt.noSess)
			}
			if !tt.noSess && errdefs.ExitCode(err) != tt.code {
				t.Errorf("exit status %d; want %d (%v)", errdefs.ExitCode(err), tt.code, err)
			}
			for _, s := range tt.contain {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			var se *session.Error
			if tt.status == 429 && (!errors.As(err, &se) || se.Quota != "sessions" || se.RetryAfter != 7*time.Second) {
				t.Errorf("quota error %#v", err)
			}
		})
	}
}

// TestBoundedAnswers: a server that answers without end (a JSON answer past MaxAnswer,
// a frame line past session.MaxFrameLine) gets an error, not the client's memory.
func TestBoundedAnswers(t *testing.T) {
	endless := func(w http.ResponseWriter, prefix string) {
		_, _ = w.Write([]byte(prefix))
		chunk := bytes.Repeat([]byte("a"), 64<<10)
		for i := 0; i < 1024; i++ { // 64 MiB, far past both limits
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}
	f := &fakeServer{t: t, token: testToken}
	f.answer = func(w http.ResponseWriter, r *http.Request, rt api.Route, body any) {
		if rt.Stream {
			w.Header().Set("Content-Type", api.NDJSON)
			endless(w, `{"fd":1,"data":"`)
			return
		}
		w.Header().Set("Content-Type", api.JSON)
		endless(w, `{"sessions":[{"id":"`)
	}
	c := serveTLS(t, f)
	if _, err := c.List(context.Background()); err == nil || !strings.Contains(err.Error(), "over") {
		t.Errorf("List of an endless answer: %v", err)
	}
	s, _ := c.Handle("s1")
	_, err := s.Exec(context.Background(), []string{"true"}, session.ExecOptions{})
	if err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("Exec of an endless line: %v", err)
	}
}

// TestDialRefuses: hosts that are not https:// or unix:///PATH, and TLS that does not
// verify.
func TestDialRefuses(t *testing.T) {
	for _, host := range []string{"http://h:80", "tcp://h:1", "h:8443", "https://", "https://u:p@h", "https://h/x", "https://h?q", "unix://rel/p", "unix:p", "ftp://h"} {
		if _, err := Dial(host); err == nil {
			t.Errorf("Dial(%q) accepted", host)
		}
	}
	for _, host := range []string{"https://h", "https://h:8443", "https://[::1]:8443/", "unix:///run/cordon/cordon.sock"} {
		if _, err := Dial(host); err != nil {
			t.Errorf("Dial(%q): %v", host, err)
		}
	}
	// A server whose certificate no CA given vouches for.
	ts := httptest.NewTLSServer(http.NotFoundHandler())
	defer ts.Close()
	c, err := Dial(ts.URL, Token(testToken))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.List(context.Background()); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("List from an unverified server: %v", err)
	}
}

// TestTokenFile: a token file must be the caller's own and readable by no one else.
func TestTokenFile(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		mode os.FileMode
		ok   bool
	}{{0o600, true}, {0o400, true}, {0o640, false}, {0o604, false}, {0o620, false}} {
		p := filepath.Join(dir, tt.mode.String())
		if err := os.WriteFile(p, []byte(testToken+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, tt.mode); err != nil {
			t.Fatal(err)
		}
		c, err := Dial("https://h", TokenFile(p))
		if tt.ok && (err != nil || c.token != testToken) {
			t.Errorf("mode %v: %v", tt.mode, err)
		}
		if !tt.ok && (err == nil || !strings.Contains(err.Error(), "group or others")) {
			t.Errorf("mode %v accepted: %v", tt.mode, err)
		}
	}
	if _, err := Dial("https://h", Token("two words")); err == nil {
		t.Error("a token with a space accepted")
	}
}

// TestUnixSocket: unix:///PATH reaches a server on that socket, with no token.
func TestUnixSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeServer{t: t}
	f.answer = func(w http.ResponseWriter, r *http.Request, rt api.Route, body any) {
		if r.Header.Get("Authorization") != "" {
			t.Error("a token sent without one set")
		}
		writeAPIJSON(w, 200, api.SessionList{Sessions: []api.Session{{ID: "u1"}}})
	}
	srv := &http.Server{Handler: f.handler()}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	c, err := Dial("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	list, err := c.List(context.Background())
	if err != nil || len(list) != 1 || list[0].ID != "u1" {
		t.Errorf("List: %+v, %v", list, err)
	}
}

// TestNoRedirect: a redirect is not followed: the token goes to the server named and
// nowhere else.
func TestNoRedirect(t *testing.T) {
	other := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the redirect was followed: %s %s, Authorization %q", r.Method, r.URL, r.Header.Get("Authorization"))
	}))
	defer other.Close()
	f := &fakeServer{t: t, token: testToken}
	f.answer = func(w http.ResponseWriter, r *http.Request, rt api.Route, body any) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}
	_, err := serveTLS(t, f).List(context.Background())
	if err == nil || !strings.Contains(err.Error(), "307") {
		t.Errorf("List answered with a redirect: %v", err)
	}
}

// TestRetryAfter: seconds or an HTTP date; nonsense is 0.
func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 5, 7, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"": 0, "30": 30 * time.Second, "-5": 0, "soon": 0, "99999999999": 0,
		now.Add(90 * time.Second).Format(http.TimeFormat): 90 * time.Second,
		now.Add(-time.Hour).Format(http.TimeFormat):       0,
	} {
		if got := retryAfter(v, now); got != want {
			t.Errorf("retryAfter(%q) = %s; want %s", v, got, want)
		}
	}
}

// TestExecKeepsTheConnection: the stream's end after an exec's result is read, so
// that the next request goes on the same connection (no new TLS handshake); a server
// that holds the stream open after the result delays Exec by drainWait at most.
func TestExecKeepsTheConnection(t *testing.T) {
	var hold atomic.Bool
	f := &fakeServer{t: t, token: testToken}
	f.answer = func(w http.ResponseWriter, r *http.Request, rt api.Route, body any) {
		w.Header().Set("Content-Type", api.NDJSON)
		_ = json.NewEncoder(w).Encode(wire.Frame{Result: &wire.Result{V: 1, Session: "s1"}})
		w.(http.Flusher).Flush() // the result, then (a moment later) the stream's end
		if hold.Load() {
			select {
			case <-r.Context().Done():
			case <-time.After(20 * time.Second):
			}
		}
	}
	ts := httptest.NewUnstartedServer(f.handler())
	var conns atomic.Int32
	ts.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	ts.StartTLS()
	t.Cleanup(ts.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Dial(ts.URL, Token(testToken), CA(ca))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := c.Handle("s1")
	for range 5 {
		if _, err := s.Exec(context.Background(), []string{"true"}, session.ExecOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("5 execs one after the other took %d connections; want 1", n)
	}
	hold.Store(true)
	t0 := time.Now()
	if _, err := s.Exec(context.Background(), []string{"true"}, session.ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d > drainWait+5*time.Second {
		t.Errorf("an exec whose stream stays open after the result took %s; want about %s", d, drainWait)
	}
}
