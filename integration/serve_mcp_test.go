package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cordonhq/cordon/internal/testutil"
	"github.com/cordonhq/cordon/server/api"
)

// bearer adds a tenant's token to every request of the MCP client.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// mcpServed connects the Go SDK's client over the streamable HTTP transport to the
// daemon's MCP endpoint, as token's tenant, with query appended to the endpoint.
func (s *served) mcpServed(t *testing.T, token, query string) (*gomcp.ClientSession, error) {
	t.Helper()
	c := s.client()
	c.Timeout = 0 // the transport's event stream lasts as long as the session
	c.Transport = bearer{token: token, next: c.Transport}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client := gomcp.NewClient(&gomcp.Implementation{Name: "cordon-test", Version: "1"}, nil)
	return client.Connect(ctx, &gomcp.StreamableClientTransport{Endpoint: "https://" + s.addr + api.MCP + query, HTTPClient: c, MaxRetries: -1}, nil)
}

// servedCall calls tool name and fails the test on a protocol error or a tool error.
func servedCall(t *testing.T, cs *gomcp.ClientSession, name string, args any, out any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &gomcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s: tool error: %s", name, resultText(res))
	}
	data, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("%s: %s: %v", name, data, err)
	}
}

const mcpInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// TestServeMCP drives `cordon serve`'s MCP endpoint with the Go SDK's client over the
// streamable HTTP transport: a tool call runs in a sandbox session of the caller's
// tenant; no token or a bad one is 401; another tenant cannot reach the session by
// its MCP session id (404 on every method); the tenant's session quota bounds its MCP
// sessions (429); closing the client stops the session and seals its log.
func TestServeMCP(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServeWith(t, "    quotas: {sessions: 2}\n")
	stopSessionsAtEnd(t, s)
	m := &mcpServe{t: t, s: s, url: "https://" + s.addr + api.MCP, acme: s.tcpClient("acme")}
	cs, err := s.mcpServed(t, s.tokens["acme"], "?backend=bwrap")
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, s.stderr)
	}
	id := m.callRuns(cs)
	m.credentials()
	m.crossing(cs)
	m.hostileOpenings()
	m.staged()
	m.closeSeals(cs, id)
}

// mcpServe is TestServeMCP's daemon, its endpoint and tenant acme's API client.
type mcpServe struct {
	t    *testing.T
	s    *served
	url  string
	acme apiClient
}

// mcpHeaders are the headers of a raw MCP POST.
var mcpHeaders = []string{"Content-Type", api.JSON, "Accept", "application/json, text/event-stream"}

// post sends one raw MCP POST with token and the extra headers.
func (m *mcpServe) post(query, token, body string, extra ...string) (int, string, http.Header) {
	m.t.Helper()
	return do(m.t, m.s.client(), "POST", m.url+query, token, strings.NewReader(body), append(slices.Clone(mcpHeaders), extra...)...)
}

// callRuns: the tools of an unstaged session of a base with no gates; a call runs in
// a session of acme's, on bwrap, which beta cannot see. It returns the session's id.
func (m *mcpServe) callRuns(cs *gomcp.ClientSession) string {
	t := m.t
	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tool := range lt.Tools {
		names[tool.Name] = true
	}
	if !names["exec"] || !names["read_file"] || names["checkpoint"] || names["gate"] {
		t.Errorf("tools of an unstaged session of a base with no gates: %v", names)
	}
	var r execResult
	servedCall(t, cs, "exec", map[string]any{"command": "echo hi > made.txt; cat made.txt"}, &r)
	if r.Stdout != "hi\n" || r.Session == "" {
		t.Fatalf("exec: %+v", r)
	}
	if got := m.acme.session(t, r.Session); got.State != "running" || got.Backend != "bwrap" {
		t.Errorf("the MCP session's session: %+v; want running on bwrap", got)
	}
	if code, body := m.s.tcpClient("beta").call(t, "GET", "/v1/sessions/"+r.Session, nil); code != http.StatusNotFound {
		t.Errorf("beta GET acme's MCP session's session: %d %s; want 404", code, body)
	}
	return r.Session
}

// credentials: no credential, a bad one: 401, to a raw client and to the SDK's.
func (m *mcpServe) credentials() {
	for _, tok := range []string{"", "not-a-token", m.s.tokens["acme"] + "x"} {
		if code, body, _ := m.post("", tok, mcpInitialize); code != http.StatusUnauthorized {
			m.t.Errorf("initialize with token %q: %d %s; want 401", tok, code, body)
		}
	}
	if _, err := m.s.mcpServed(m.t, "not-a-token", ""); err == nil {
		m.t.Error("the SDK's client connected with a bad token")
	}
}

// crossingCall is a tools/call another tenant tries on acme's MCP session.
const crossingCall = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"exec","arguments":{"command":"echo stolen > stolen.txt"}}}`

// crossing: tenant beta holding acme's MCP session id gets 404 on every method, and
// acme's session is untouched.
func (m *mcpServe) crossing(cs *gomcp.ClientSession) {
	t := m.t
	sid := cs.ID()
	if sid == "" {
		t.Fatal("the client has no MCP session id")
	}
	for _, c := range []struct{ method, body string }{{"POST", crossingCall}, {"GET", ""}, {"DELETE", ""}} {
		hdr := append([]string{"Mcp-Session-Id", sid, "Mcp-Protocol-Version", "2025-06-18"}, mcpHeaders...)
		code, body, _ := do(t, m.s.client(), c.method, m.url, m.s.tokens["beta"], strings.NewReader(c.body), hdr...)
		if code != http.StatusNotFound {
			t.Errorf("beta %s with acme's MCP session id: %d %s; want 404", c.method, code, body)
		}
	}
	var r execResult
	servedCall(t, cs, "exec", map[string]any{"command": "test ! -e stolen.txt && echo untouched"}, &r)
	if r.Stdout != "untouched\n" {
		t.Errorf("after beta's attempts: %q", r.Stdout)
	}
}

// hostileOpenings: not an initialize, an unknown query, a bad stage or workspace:
// 400. An initialize the MCP server refuses (a protocol version it does not speak)
// leaves no session running: the one started for it is stopped.
func (m *mcpServe) hostileOpenings() {
	t := m.t
	for _, c := range []struct{ query, body string }{
		{"", crossingCall},
		{"", `[` + mcpInitialize + `]`},
		{"?evil=1", mcpInitialize},
		{"?stage=maybe", mcpInitialize},
		{"?workspace=../x", mcpInitialize},
	} {
		if code, body, _ := m.post(c.query, m.s.tokens["acme"], c.body); code != http.StatusBadRequest {
			t.Errorf("opening %s %.40s: %d %s; want 400", c.query, c.body, code, body)
		}
	}
	code, body, _ := m.post("", m.s.tokens["acme"], mcpInitialize, "Mcp-Protocol-Version", "1999-01-01")
	if code != http.StatusBadRequest || !strings.Contains(body, `"error"`) {
		t.Errorf("initialize with an unknown protocol version: %d %s; want 400 as JSON", code, body)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		var list api.SessionList
		_, lb := m.acme.call(t, "GET", "/v1/sessions", nil)
		_ = json.Unmarshal([]byte(lb), &list)
		running := 0
		for _, ss := range list.Sessions {
			if ss.State == "running" {
				running++
			}
		}
		if running == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions running a minute after a refused initialize; want 1: %s", running, lb)
		}
	}
}

// staged: a staged MCP session checkpoints; a third session is past the quota of 2.
func (m *mcpServe) staged() {
	t := m.t
	staged, err := m.s.mcpServed(t, m.s.tokens["acme"], "?stage=true&backend=bwrap")
	if err != nil {
		t.Fatalf("connect staged: %v", err)
	}
	var cp struct {
		ID int `json:"id"`
	}
	servedCall(t, staged, "checkpoint", map[string]any{"name": "first"}, &cp)
	if cp.ID <= 0 {
		t.Errorf("checkpoint over HTTP: %+v", cp)
	}
	code, body, hdr := m.post("", m.s.tokens["acme"], mcpInitialize)
	if code != http.StatusTooManyRequests || !strings.Contains(body, `"quota":"sessions"`) || hdr.Get("Retry-After") == "" {
		t.Errorf("a third MCP session with a quota of 2: %d %s; want 429 naming sessions", code, body)
	}
	if err := staged.Close(); err != nil {
		t.Errorf("close staged: %v", err)
	}
}

// closeSeals: closing the client (its DELETE) stops session id and seals its log,
// which records the tool call's command; the quota is free again.
func (m *mcpServe) closeSeals(cs *gomcp.ClientSession, id string) {
	t := m.t
	if err := cs.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if got := m.acme.session(t, id); got.State != "stopped" {
		t.Errorf("after the client closed: %+v; want stopped (the DELETE is answered once it is)", got)
	}
	audit := filepath.Join(filepath.Dir(m.s.file), "acme", "audit")
	v := runResult(t, exec.Command(testutil.Cordon(t), "audit", "verify", id, "--audit-dir", audit), "audit verify")
	if v.code != 0 || !strings.Contains(v.stdout, id+": intact and sealed") {
		t.Errorf("cordon audit verify %s: %s; want intact and sealed", id, v)
	}
	show := runResult(t, exec.Command(testutil.Cordon(t), "audit", "show", id, "--audit-dir", audit), "audit show")
	if !strings.Contains(show.stdout, "echo hi > made.txt") {
		t.Errorf("the log does not record the tool call's command:\n%s", show.stdout)
	}
	again, err := m.s.mcpServed(t, m.s.tokens["acme"], "")
	if err != nil {
		t.Fatalf("connect after the others closed: %v", err)
	}
	_ = again.Close()
}

// TestServeMCPSessionEnds: an MCP session does not outlive its session (stopped
// through the API, its MCP session id is 404 within seconds), and a daemon told to
// stop stops the sessions of its MCP sessions, sealed, since no client can reach them
// again.
func TestServeMCPSessionEnds(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServe(t)
	stopSessionsAtEnd(t, s)
	acme := s.tcpClient("acme")
	url := "https://" + s.addr + api.MCP
	hdr := []string{"Content-Type", api.JSON, "Accept", "application/json, text/event-stream", "Mcp-Protocol-Version", "2025-06-18"}

	cs, err := s.mcpServed(t, s.tokens["acme"], "")
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	var r execResult
	servedCall(t, cs, "exec", map[string]any{"command": "true"}, &r)
	if code, body := acme.call(t, "POST", "/v1/sessions/"+r.Session+"/stop", nil); code != http.StatusOK {
		t.Fatalf("stop: %d %s", code, body)
	}
	ping := `{"jsonrpc":"2.0","id":9,"method":"ping"}`
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		code, _, _ := do(t, s.client(), "POST", url, s.tokens["acme"], strings.NewReader(ping), append(hdr, "Mcp-Session-Id", cs.ID())...)
		if code == http.StatusNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the MCP session still answers (%d) 30s after its session stopped", code)
		}
	}
	_ = cs.Close()

	// The daemon stopping stops the session of a live MCP session.
	live, err := s.mcpServed(t, s.tokens["acme"], "")
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	servedCall(t, live, "exec", map[string]any{"command": "true"}, &r)
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the daemon did not stop within 2 minutes of SIGTERM:\n%s", s.stderr)
	}
	if !strings.Contains(s.stderr.String(), `"msg":"mcp session ended","tenant":"acme","session":"`+r.Session+`"`) {
		t.Errorf("the daemon stopped without ending the MCP session of %s:\n%s", r.Session, s.stderr)
	}
	// Started again (its tenants' disks mounted), it shows the session stopped and
	// its log sealed: nothing was left for the restart to adopt.
	s.launch(t)
	if got := s.tcpClient("acme").session(t, r.Session); got.State != "stopped" {
		t.Errorf("after the restart: %+v; want stopped", got)
	}
	audit := filepath.Join(filepath.Dir(s.file), "acme", "audit")
	v := runResult(t, exec.Command(testutil.Cordon(t), "audit", "verify", r.Session, "--audit-dir", audit), "audit verify")
	if v.code != 0 || !strings.Contains(v.stdout, r.Session+": intact and sealed") {
		t.Errorf("cordon audit verify %s: %s; want intact and sealed", r.Session, v)
	}
}

// TestServeMCPContainers: an MCP session over HTTP on docker and containerd runs its
// calls there and is stopped, leaving nothing, when its client closes.
func TestServeMCPContainers(t *testing.T) {
	requireEngines(t)
	s := startServe(t)
	stopSessionsAtEnd(t, s)
	for _, b := range containerBackends {
		t.Run(b, func(t *testing.T) {
			cs, err := s.mcpServed(t, s.tokens["acme"], "?backend="+b)
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			var r execResult
			servedCall(t, cs, "exec", map[string]any{"command": "echo in-" + b}, &r)
			if r.Stdout != "in-"+b+"\n" {
				t.Errorf("exec: %+v", r)
			}
			if got := s.tcpClient("acme").session(t, r.Session); got.Backend != b {
				t.Errorf("the session runs on %q; want %s", got.Backend, b)
			}
			if err := cs.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
			if got := s.tcpClient("acme").session(t, r.Session); got.State != "stopped" {
				t.Errorf("after close: %+v; want stopped", got)
			}
			assertNoLeftovers(t, b)
		})
	}
}

// TestServeMCPDocConfig: docs/serve.md's MCP configuration names the endpoint the
// daemon serves and the header its authentication reads.
func TestServeMCPDocConfig(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "serve.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(data), "```json\n{\"mcpServers\"")
	block, _, _ = strings.Cut(block, "```")
	if !ok {
		t.Fatal("docs/serve.md has no mcpServers block")
	}
	var doc struct {
		MCPServers map[string]struct {
			Type    string            `json:"type"`
			URL     string            `json:"url"`
			Headers map[string]string `json:"headers"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(`{"mcpServers"`+block), &doc); err != nil {
		t.Fatalf("docs/serve.md's mcpServers block: %v", err)
	}
	for name, c := range doc.MCPServers {
		if c.Type != "http" || !strings.HasSuffix(c.URL, api.MCP) || !strings.HasPrefix(c.Headers["Authorization"], "Bearer ") {
			t.Errorf("%s: %+v; want type http, a URL ending %s and a bearer Authorization header", name, c, api.MCP)
		}
	}
}

// TestServeMCPIdle: a client that initializes and vanishes holds its session no
// longer than the tenant's quotas.mcp_idle: then the session is stopped, its log
// sealed, and its MCP session id is 404.
func TestServeMCPIdle(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServeWith(t, "    quotas: {mcp_idle: 2s}\n")
	stopSessionsAtEnd(t, s)
	m := &mcpServe{t: t, s: s, url: "https://" + s.addr + api.MCP, acme: s.tcpClient("acme")}
	code, body, hdr := m.post("", s.tokens["acme"], mcpInitialize)
	sid := hdr.Get("Mcp-Session-Id")
	if code != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %s; want 200 with an Mcp-Session-Id", code, body)
	}
	var list api.SessionList
	_, lb := m.acme.call(t, "GET", "/v1/sessions", nil)
	if json.Unmarshal([]byte(lb), &list) != nil || len(list.Sessions) != 1 || list.Sessions[0].State != "running" {
		t.Fatalf("sessions after the initialize: %s; want one running", lb)
	}
	id := list.Sessions[0].ID
	start := time.Now()
	for m.acme.session(t, id).State != "stopped" {
		if time.Since(start) > time.Minute {
			t.Fatalf("the session of a vanished client still runs a minute later (mcp_idle 2s)")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if time.Since(start) < time.Second {
		t.Errorf("stopped %v after the initialize; want no sooner than the idle time", time.Since(start))
	}
	ping := `{"jsonrpc":"2.0","id":2,"method":"ping"}`
	if code, body, _ := m.post("", s.tokens["acme"], ping, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", "2025-06-18"); code != http.StatusNotFound {
		t.Errorf("the idle MCP session's id: %d %s; want 404", code, body)
	}
	audit := filepath.Join(filepath.Dir(s.file), "acme", "audit")
	v := runResult(t, exec.Command(testutil.Cordon(t), "audit", "verify", id, "--audit-dir", audit), "audit verify")
	if v.code != 0 || !strings.Contains(v.stdout, id+": intact and sealed") {
		t.Errorf("cordon audit verify %s: %s; want intact and sealed", id, v)
	}
}

// TestServeMCPGate: an MCP session over HTTP of a tenant whose base contract has
// gates lists gate (the gates a person may approve, not one whose approve is deny);
// a call waits until the tenant's approver approves it through /v1/gates, then
// returns the operation's output.
func TestServeMCPGate(t *testing.T) {
	testutil.RequireBwrap(t)
	base := filepath.Join(shortTempDir(t), "base.yaml")
	mustWrite(t, base, serveGateContract+"  - {name: nope, run: [\"true\"], approve: deny, why: people do this}\n")
	s := startServeWith(t, "    base_contract: "+base+"\n")
	stopSessionsAtEnd(t, s)
	cs, err := s.mcpServed(t, s.tokens["acme"], "?backend=bwrap")
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, s.stderr)
	}
	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var gate *gomcp.Tool
	for _, tool := range lt.Tools {
		if tool.Name == "gate" {
			gate = tool
		}
	}
	if gate == nil {
		t.Fatal("gate is not listed for a base contract with gates")
	}
	if schema, _ := json.Marshal(gate.InputSchema); !strings.Contains(string(schema), `"enum":["hello"]`) {
		t.Errorf("gate's schema: %s; want the enum [hello]", schema)
	}
	var r execResult
	servedCall(t, cs, "exec", map[string]any{"command": "true"}, &r)

	type answer struct {
		res *gomcp.CallToolResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		res, err := cs.CallTool(ctx, &gomcp.CallToolParams{Name: "gate", Arguments: map[string]any{"name": "hello"}})
		done <- answer{res, err}
	}()
	leadCert, _, _ := s.ca.issue(t, "lead.acme", false)
	lead := apiCall{base: "https://" + s.addr, c: s.client(leadCert)}
	p := pendingOf(t, lead, r.Session, 1)[0]
	if code, body := lead.do(t, "POST", "/v1/gates/"+p.ID+"/approve", ""); code != http.StatusOK {
		t.Fatalf("approve: %d %s", code, body)
	}
	select {
	case a := <-done:
		if a.err != nil || a.res.IsError || !strings.Contains(resultText(a.res), "hi from the host") {
			t.Errorf("the approved gate call: %v %+v", a.err, a.res)
		}
	case <-time.After(time.Minute):
		t.Fatal("the gate call did not end a minute after its approval")
	}
	_ = cs.Close()
}

// TestServeMCPPool: an initialize naming a pool claims its warm session: a staged
// pool on a base contract with gates gives an MCP session that lists checkpoint,
// rollback and gate.
func TestServeMCPPool(t *testing.T) {
	testutil.RequireBwrap(t)
	base := filepath.Join(shortTempDir(t), "base.yaml")
	mustWrite(t, base, serveGateContract)
	s := startServeWith(t, "    base_contract: "+base+"\n    pools: [{name: staged, size: 1, backend: bwrap, stage: true}]\n")
	stopPoolAtEnd(t, s)
	s.waitClaimable(t, 2*time.Minute, "acme", "staged", 1)
	cs, err := s.mcpServed(t, s.tokens["acme"], "?pool=staged")
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, s.stderr)
	}
	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tool := range lt.Tools {
		names[tool.Name] = true
	}
	if !names["checkpoint"] || !names["rollback"] || !names["gate"] {
		t.Errorf("tools of a session of a staged pool on a base with gates: %v", names)
	}
	var r execResult
	servedCall(t, cs, "exec", map[string]any{"command": "true"}, &r)
	if got := s.tcpClient("acme").session(t, r.Session); !got.Warm || !got.Stage {
		t.Errorf("the MCP session's session: %+v; want claimed from the staged pool", got)
	}
	_ = cs.Close()
}

// acmeMCP connects an MCP client to the daemon as tenant acme on bwrap, failing the
// test when it cannot; the client is closed when the test ends.
func (s *served) acmeMCP(t *testing.T) *gomcp.ClientSession {
	t.Helper()
	cs, err := s.mcpServed(t, s.tokens["acme"], "?backend=bwrap")
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, s.stderr)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}
