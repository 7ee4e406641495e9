package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
	"github.com/cordonhq/cordon/server/api"
	"github.com/cordonhq/cordon/session/wire"
)

// apiClient is one way to reach a served daemon: a base URL, an HTTP client and a
// tenant's agent token.
type apiClient struct {
	base  string
	c     *http.Client
	token string
}

func (s *served) tcpClient(tenant string) apiClient {
	c := s.client()
	c.Timeout = 5 * time.Minute // a session start may pull an image; exec streams
	return apiClient{base: "https://" + s.addr, c: c, token: s.tokens[tenant]}
}

func (s *served) unixClient(tenant string) apiClient {
	c := &http.Client{Timeout: 5 * time.Minute, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", s.sock)
		},
	}}
	return apiClient{base: "http://cordon", c: c, token: s.tokens[tenant]}
}

// call sends one request with a JSON body (nil for none) and returns the status and
// the body.
func (a apiClient) call(t *testing.T, method, path string, body any) (int, string) {
	t.Helper()
	var rd *bytes.Reader
	var hdr []string
	if body != nil {
		b, _ := json.Marshal(body)
		rd, hdr = bytes.NewReader(b), []string{"Content-Type", api.JSON}
	} else {
		rd = bytes.NewReader(nil)
	}
	code, got, _ := do(t, a.c, method, a.base+path, a.token, rd, hdr...)
	return code, got
}

// start starts a session and returns it.
func (a apiClient) start(t *testing.T, workspace, backend string) api.Session {
	t.Helper()
	code, body := a.call(t, "POST", "/v1/sessions", api.StartRequest{Workspace: workspace, Backend: backend})
	var sess api.Session
	if code != http.StatusCreated || json.Unmarshal([]byte(body), &sess) != nil || sess.ID == "" {
		t.Fatalf("start on %s: got %d %s; want 201 with a session", backend, code, body)
	}
	return sess
}

func (a apiClient) session(t *testing.T, id string) api.Session {
	t.Helper()
	code, body := a.call(t, "GET", "/v1/sessions/"+id, nil)
	var sess api.Session
	if code != http.StatusOK || json.Unmarshal([]byte(body), &sess) != nil {
		t.Fatalf("GET session %s: got %d %s", id, code, body)
	}
	return sess
}

// execStream runs argv in session id and returns the frames as they came, after
// checking the stream's status and content type.
func (a apiClient) exec(t *testing.T, id string, argv ...string) []wire.Frame {
	t.Helper()
	return a.execReq(t, id, api.ExecRequest{Argv: argv})
}

func (a apiClient) execReq(t *testing.T, id string, er api.ExecRequest) []wire.Frame {
	t.Helper()
	resp := a.execResponse(t, id, er)
	defer resp.Body.Close()
	var frames []wire.Frame
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var f wire.Frame
		if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			t.Fatalf("a stream line %q: %v", sc.Bytes(), err)
		}
		frames = append(frames, f)
	}
	return frames
}

func (a apiClient) execResponse(t *testing.T, id string, er api.ExecRequest) *http.Response {
	t.Helper()
	b, _ := json.Marshal(er)
	req, _ := http.NewRequest("POST", a.base+"/v1/sessions/"+id+"/exec", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+a.token)
	req.Header.Set("Content-Type", api.JSON)
	resp, err := a.c.Do(req)
	if err != nil {
		t.Fatalf("exec: %v", err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != api.NDJSON {
		resp.Body.Close()
		t.Fatalf("exec: got %d %s; want 200 %s", resp.StatusCode, resp.Header.Get("Content-Type"), api.NDJSON)
	}
	return resp
}

// outcome splits an exec's frames into its stdout, its stderr and its last frame.
func outcome(t *testing.T, frames []wire.Frame) (string, string, wire.Frame) {
	t.Helper()
	if len(frames) == 0 {
		t.Fatal("an exec streamed no frame")
	}
	var out, errb strings.Builder
	for _, f := range frames[:len(frames)-1] {
		switch f.FD {
		case 1:
			out.Write(f.Data)
		case 2:
			errb.Write(f.Data)
		default:
			t.Errorf("a frame before the last is no output chunk: %+v", f)
		}
	}
	return out.String(), errb.String(), frames[len(frames)-1]
}

// stopSessionsAtEnd stops, when the test ends, every session still running in the
// tenants' run roots, so that a failed test leaves no supervisor behind.
func stopSessionsAtEnd(t *testing.T, s *served) {
	t.Cleanup(func() { stopLeftSessions(t, filepath.Dir(s.file)) })
}

// TestServeSessions drives sessions through the real daemon: a start, an exec
// streaming its output and its result, a write seen in the diffstat and the sweep, a
// stop, over TCP with TLS and over the unix socket, on every backend; and tenant
// crossing on every session endpoint.
func TestServeSessions(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServe(t)
	stopSessionsAtEnd(t, s)
	t.Run("bwrap over TCP with TLS", func(t *testing.T) { serveSessionLifecycle(t, s.tcpClient("acme"), "bwrap") })
	t.Run("bwrap over the unix socket", func(t *testing.T) { serveSessionLifecycle(t, s.unixClient("acme"), "bwrap") })
	t.Run("another tenant's session is 404 on every endpoint", func(t *testing.T) { serveSessionCrossing(t, s) })
	t.Run("hostile starts are refused", func(t *testing.T) { serveHostileStarts(t, s) })
	t.Run("a staged session checkpoints and rolls back", func(t *testing.T) { serveStaged(t, s.tcpClient("acme")) })
	t.Run("a client going away ends its command", func(t *testing.T) { serveExecDisconnect(t, s.tcpClient("acme")) })
	t.Run("an exec outlives the server's request timeouts", func(t *testing.T) { serveLongExec(t) })
	t.Run("containers", func(t *testing.T) {
		requireEngines(t)
		for _, b := range containerBackends {
			t.Run(b, func(t *testing.T) {
				serveSessionLifecycle(t, s.tcpClient("acme"), b)
				assertNoLeftovers(t, b)
			})
		}
	})
}

// serveSessionLifecycle: start, exec, a write, sweep, stop; the stopped session is
// still listed, and refuses an exec.
func serveSessionLifecycle(t *testing.T, a apiClient, backend string) {
	ws := "ws-" + backend + fmt.Sprint(time.Now().UnixNano())
	sess := a.start(t, ws, backend)
	if sess.State != "running" || sess.Backend != backend || sess.Workspace != ws {
		t.Errorf("started: %+v; want running on %s in %s", sess, backend, ws)
	}
	out, errOut, last := outcome(t, a.exec(t, sess.ID, "sh", "-c", "echo hi; echo err >&2; exit 3"))
	if out != "hi\n" || errOut != "err\n" || last.Result == nil || last.Result.ExitCode != 3 || last.Result.Session != sess.ID {
		t.Errorf("exec: stdout %q, stderr %q, last frame %+v; want hi, err and exit_code 3", out, errOut, last)
	}
	out, _, last = outcome(t, a.execReq(t, sess.ID, api.ExecRequest{Argv: []string{"cat"}, Stdin: []byte("from stdin")}))
	if out != "from stdin" || last.Result == nil || last.Result.ExitCode != 0 {
		t.Errorf("exec with stdin: stdout %q, last frame %+v; want it echoed", out, last)
	}
	_, _, last = outcome(t, a.exec(t, sess.ID, "sh", "-c", "printf 'a\\nb\\n' > made.txt"))
	if last.Result == nil || last.Result.ExitCode != 0 || last.Result.Diffstat.Files != 1 || last.Result.Diffstat.Insertions != 2 {
		t.Errorf("a write: last frame %+v; want exit 0 and a diffstat of 1 file, 2 insertions", last)
	}
	code, body := a.call(t, "POST", "/v1/sessions/"+sess.ID+"/sweep", nil)
	if code != 200 || !strings.Contains(body, `"made.txt"`) {
		t.Errorf("sweep: got %d %s; want 200 naming made.txt", code, body)
	}
	code, body = a.call(t, "POST", "/v1/sessions/"+sess.ID+"/stop", nil)
	if code != 200 || !strings.Contains(body, `"state":"stopped"`) {
		t.Fatalf("stop: got %d %s; want 200 stopped", code, body)
	}
	code, body = a.call(t, "GET", "/v1/sessions", nil)
	if code != 200 || !strings.Contains(body, `{"id":"`+sess.ID+`","state":"stopped"`) {
		t.Errorf("list after stop: got %d %s; want %s listed as stopped", code, body, sess.ID)
	}
	code, body = a.call(t, "POST", "/v1/sessions/"+sess.ID+"/exec", api.ExecRequest{Argv: []string{"true"}})
	if code != http.StatusConflict {
		t.Errorf("exec in a stopped session: got %d %s; want 409", code, body)
	}
}

// serveHostileStarts: bad names, backends and contracts are 400 and make nothing; a
// workspace entry that is a link is refused; a cordon.yaml a sandbox left in the
// workspace is never the session's contract.
func serveHostileStarts(t *testing.T, s *served) {
	a := s.tcpClient("acme")
	workspaces := filepath.Join(filepath.Dir(s.file), "acme", "workspaces")
	for _, req := range []api.StartRequest{
		{Workspace: ".."}, {Workspace: ".hidden"}, {Workspace: "a/b"}, {Workspace: strings.Repeat("w", 64)},
		{Workspace: "ok", Backend: "nope"},
		{Workspace: "ok", Contract: "version: ["},
	} {
		if code, body := a.call(t, "POST", "/v1/sessions", req); code != http.StatusBadRequest {
			t.Errorf("start %+v: got %d %s; want 400", req, code, body)
		}
	}
	// A contract naming a host path outside its workspace is refused by the tenant's
	// base (server/admit): 403.
	for _, yml := range []string{"version: 1\nworkspace: /\n", "version: 1\nfilesystem: {writable: [/etc]}\n"} {
		if code, body := a.call(t, "POST", "/v1/sessions", api.StartRequest{Workspace: "ok", Contract: yml}); code != http.StatusForbidden {
			t.Errorf("start with %q: got %d %s; want 403", yml, code, body)
		}
	}
	for _, name := range []string{"..", ".hidden", "a", "ok"} {
		if _, err := os.Lstat(filepath.Join(workspaces, name)); err == nil && name != ".." {
			t.Errorf("a refused start made %s", name)
		}
	}
	mustMkdir(t, workspaces)
	if err := os.Symlink("/etc", filepath.Join(workspaces, "linked")); err != nil {
		t.Fatal(err)
	}
	if code, body := a.call(t, "POST", "/v1/sessions", api.StartRequest{Workspace: "linked", Backend: "bwrap"}); code < 400 {
		t.Errorf("a workspace that links to /etc: got %d %s; want refused", code, body)
	}
	mustWrite(t, filepath.Join(workspaces, "planted", "cordon.yaml"), "version: [\n")
	sess := a.start(t, "planted", "bwrap")
	if code, body := a.call(t, "POST", "/v1/sessions/"+sess.ID+"/stop", nil); code != 200 {
		t.Errorf("stop: got %d %s", code, body)
	}
}

// serveStaged: a staged session's checkpoint and rollback over the API.
func serveStaged(t *testing.T, a apiClient) {
	code, body := a.call(t, "POST", "/v1/sessions", api.StartRequest{Workspace: "staged", Backend: "bwrap", Stage: true})
	var sess api.Session
	if code != http.StatusCreated || json.Unmarshal([]byte(body), &sess) != nil || !sess.Stage {
		t.Fatalf("a staged start: got %d %s; want 201, stage true", code, body)
	}
	defer a.call(t, "POST", "/v1/sessions/"+sess.ID+"/stop", nil)
	a.exec(t, sess.ID, "sh", "-c", "echo one > f")
	if code, body := a.call(t, "POST", "/v1/sessions/"+sess.ID+"/checkpoint", api.CheckpointRequest{Name: "one"}); code != 200 || !strings.Contains(body, `"name":"one"`) {
		t.Fatalf("checkpoint: got %d %s; want 200 naming one", code, body)
	}
	a.exec(t, sess.ID, "sh", "-c", "echo two > f")
	if code, body := a.call(t, "POST", "/v1/sessions/"+sess.ID+"/rollback", api.RollbackRequest{To: "one"}); code != 200 || !strings.Contains(body, `"f"`) {
		t.Fatalf("rollback: got %d %s; want 200 with f changed", code, body)
	}
	if out, _, _ := outcome(t, a.exec(t, sess.ID, "cat", "f")); out != "one\n" {
		t.Errorf("f after the rollback: %q; want one", out)
	}
	if code, body := a.call(t, "POST", "/v1/sessions/"+sess.ID+"/rollback", api.RollbackRequest{To: "nope"}); code/100 != 4 {
		t.Errorf("a rollback to no checkpoint: got %d %s; want a 4xx", code, body)
	}
}

// serveSessionCrossing: tenant beta's credential on acme's session id gets, on every
// session endpoint, the 404 a nonexistent id gets, byte for byte; acme's session is
// untouched, and beta's list does not have it.
func serveSessionCrossing(t *testing.T, s *served) {
	acme, beta := s.tcpClient("acme"), s.tcpClient("beta")
	sess := acme.start(t, "crossed", "bwrap")
	bodies := map[string]any{
		"/exec": api.ExecRequest{Argv: []string{"sh", "-c", "echo pwned > pwned.txt"}}, "/sweep": nil,
		"/checkpoint": api.CheckpointRequest{}, "/rollback": api.RollbackRequest{To: "1"}, "/stop": nil, "": nil, "/patch": nil,
	}
	const missing = "20991231T000000Z-000000"
	n := 0
	for _, rt := range api.Routes {
		prefix, suffix, ok := strings.Cut(rt.Path, "{id}")
		if !ok || prefix != "/v1/sessions/" {
			continue
		}
		n++
		t.Run(rt.Method+" "+rt.Path, func(t *testing.T) {
			body, known := bodies[suffix]
			if !known {
				t.Fatalf("no request body for %s: add it to the table", rt.Path)
			}
			wantCode, want := beta.call(t, rt.Method, prefix+missing+suffix, body)
			code, got := beta.call(t, rt.Method, prefix+sess.ID+suffix, body)
			if wantCode != http.StatusNotFound || code != wantCode || got != want {
				t.Errorf("another tenant's id: got %d %s; a missing id: %d %s; want both 404, the same", code, got, wantCode, want)
			}
		})
	}
	if n < 6 {
		t.Errorf("%d session endpoints with an id in api.Routes; want at least 6", n)
	}
	if code, body := beta.call(t, "GET", "/v1/sessions", nil); code != 200 || strings.Contains(body, sess.ID) {
		t.Errorf("beta's list: got %d %s; want 200 without %s", code, body, sess.ID)
	}
	if got := acme.session(t, sess.ID); got.State != "running" {
		t.Errorf("acme's session after beta's requests: %+v; want running", got)
	}
	out, _, last := outcome(t, acme.exec(t, sess.ID, "sh", "-c", "test ! -e pwned.txt && echo ok"))
	if out != "ok\n" || last.Result == nil || last.Result.ExitCode != 0 {
		t.Errorf("acme's exec after beta's requests: stdout %q, %+v; want only ok (no pwned.txt)", out, last)
	}
	if code, body := acme.call(t, "POST", "/v1/sessions/"+sess.ID+"/stop", nil); code != 200 {
		t.Errorf("stop: got %d %s", code, body)
	}
}

// streamStarted starts an exec of argv and returns its response once its first frame
// came: within 20 s (streamed at once, long before the command ends), an output chunk
// of want.
func streamStarted(t *testing.T, a apiClient, id, want string, argv ...string) *http.Response {
	t.Helper()
	type read struct {
		resp *http.Response
		line []byte
		err  error
	}
	got := make(chan read, 1)
	go func() {
		b, _ := json.Marshal(api.ExecRequest{Argv: argv})
		req, _ := http.NewRequest("POST", a.base+"/v1/sessions/"+id+"/exec", bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+a.token)
		req.Header.Set("Content-Type", api.JSON)
		resp, err := a.c.Do(req)
		var line []byte
		if err == nil {
			line, err = bufio.NewReader(resp.Body).ReadBytes('\n')
		}
		got <- read{resp, line, err}
	}()
	select {
	case r := <-got:
		var first wire.Frame
		if r.err != nil || json.Unmarshal(r.line, &first) != nil || string(first.Data) != want {
			t.Fatalf("the first frame: %q, %v; want %q", r.line, r.err, want)
		}
		return r.resp
	case <-time.After(20 * time.Second):
		t.Fatalf("no frame within 20s; want %q streamed at once", want)
		return nil
	}
}

// serveExecDisconnect: a client closing its connection mid-exec ends the command.
func serveExecDisconnect(t *testing.T, a apiClient) {
	sess := a.start(t, "disconnect", "bwrap")
	defer a.call(t, "POST", "/v1/sessions/"+sess.ID+"/stop", nil)
	const sleeper = "sleep 4243"
	resp := streamStarted(t, a, sess.ID, "started\n", "sh", "-c", "echo started; exec "+sleeper)
	waitRunning(t, sleeper, true, "while the exec streams")
	resp.Body.Close()
	a.c.CloseIdleConnections()
	waitRunning(t, sleeper, false, "after its client went away")
}

// waitRunning waits up to 20 s until a process of exactly cmdline runs (running) or
// none does.
func waitRunning(t *testing.T, cmdline string, running bool, when string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); (len(processesRunning(cmdline)) > 0) != running; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%q running %s: %v; want %v", cmdline, when, !running, running)
		}
	}
}

// serveLongExec: an exec streams past the server's request and response timeouts
// (listen.timeouts, here 2 s and 3 s), which its stream lifts, to its result.
func serveLongExec(t *testing.T) {
	s := startServeListen(t, "  timeouts: {request: 2s, response: 3s}\n", "")
	stopSessionsAtEnd(t, s)
	a := s.tcpClient("acme")
	sess := a.start(t, "long", "bwrap")
	defer a.call(t, "POST", "/v1/sessions/"+sess.ID+"/stop", nil)
	er := api.ExecRequest{Argv: []string{"sh", "-c", "echo a; sleep 5; echo b"}}
	out, _, last := outcome(t, a.execReq(t, sess.ID, er))
	if out != "a\nb\n" || last.Result == nil || last.Result.ExitCode != 0 {
		t.Errorf("a 5 s exec: stdout %q, last frame %+v; want a, b and exit 0", out, last)
	}
}

// TestServeSessionsSurviveRestart: the daemon killed with SIGKILL while an exec
// streams; started again on the same config, it lists the session running and runs a
// new exec in it; after the stop, the session's audit log verifies.
func TestServeSessionsSurviveRestart(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServe(t)
	stopSessionsAtEnd(t, s)
	a := s.tcpClient("acme")
	sess := a.start(t, "restart", "bwrap")

	const sleeper = "sleep 4244"
	resp := streamStarted(t, a, sess.ID, "started\n", "sh", "-c", "echo started; exec "+sleeper)
	defer resp.Body.Close()
	waitRunning(t, sleeper, true, "while the exec streams")
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-s.done
	// The command's client (the daemon) is gone: the supervisor ends it.
	waitRunning(t, sleeper, false, "after the daemon was killed")
	s.launch(t)

	a = s.tcpClient("acme")
	if got := a.session(t, sess.ID); got.State != "running" {
		t.Fatalf("after the restart: %+v; want running", got)
	}
	out, _, last := outcome(t, a.exec(t, sess.ID, "echo", "again"))
	if out != "again\n" || last.Result == nil || last.Result.ExitCode != 0 {
		t.Errorf("an exec after the restart: stdout %q, %+v; want again, exit 0", out, last)
	}
	if code, body := a.call(t, "POST", "/v1/sessions/"+sess.ID+"/stop", nil); code != 200 {
		t.Fatalf("stop: got %d %s", code, body)
	}
	audit := filepath.Join(filepath.Dir(s.file), "acme", "audit")
	r := runResult(t, exec.Command(testutil.Cordon(t), "audit", "verify", sess.ID, "--audit-dir", audit), "audit verify")
	if r.code != 0 || !strings.Contains(r.stdout, sess.ID+": intact and sealed") {
		t.Errorf("cordon audit verify %s: %s; want intact and sealed", sess.ID, r)
	}
}
