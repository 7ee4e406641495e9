package integration

// Red-team tests of `cordon serve`'s MCP endpoint (/v1/mcp): each attacks the real
// daemon as a hostile MCP client, a hostile tenant or a hostile sandboxed process, and
// asserts the SAFE behaviour, so a test that fails is an attack that worked.

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cordonhq/cordon/internal/testutil"
	"github.com/cordonhq/cordon/server/api"
)

// rawMCPPost writes one MCP POST of body for session sid (none when "") on a fresh TLS
// connection, reads the status line only and returns it with the connection, left
// open and unread: a client that sends and never reads its answer.
func rawMCPPost(t *testing.T, s *served, token, sid, body string, header ...string) (string, *tls.Conn) {
	t.Helper()
	c := rawMCPSend(t, s, token, sid, body, header...)
	status, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the status: %v", err)
	}
	return strings.TrimSpace(status), c
}

// rawMCPSend is rawMCPPost without reading anything: an answer in an event stream
// begins only with its first event.
func rawMCPSend(t *testing.T, s *served, token, sid, body string, header ...string) *tls.Conn {
	t.Helper()
	c, err := tls.Dial("tcp", s.addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var b strings.Builder
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n", api.MCP, s.addr, token)
	fmt.Fprintf(&b, "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n", len(body))
	if sid != "" {
		fmt.Fprintf(&b, "Mcp-Session-Id: %s\r\n", sid)
	}
	for i := 0; i+1 < len(header); i += 2 {
		fmt.Fprintf(&b, "%s: %s\r\n", header[i], header[i+1])
	}
	b.WriteString("\r\n")
	b.WriteString(body)
	c.SetDeadline(time.Now().Add(time.Minute))
	// Written while the answer is read: a server that refuses the request before its
	// body's end may close the connection under the writer.
	go func() { _, _ = io.WriteString(c, b.String()) }()
	return c
}

// goroutines is the daemon's go_goroutines, scraped from its metrics listener.
func goroutines(t *testing.T, metrics string) int {
	t.Helper()
	m := regexp.MustCompile(`(?m)^go_goroutines (\d+)`).FindStringSubmatch(scrapeMetrics(t, metrics))
	if m == nil {
		t.Fatal("no go_goroutines in the metrics")
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// TestRedMCPBatch: one POST of a JSON-RPC batch of 200000 pings (9 MB, inside the
// 24 MiB bound), from a client that never reads the answer, is refused (400); it does
// not become 200000 handlers, each holding a goroutine while the answers back up
// behind the unread stream, which a tenant could repeat on each of its held
// requests until the daemon every tenant shares runs out of memory.
func TestRedMCPBatch(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServe(t)
	stopSessionsAtEnd(t, s)
	metrics := s.metricsAddr(t)
	cs := s.acmeMCP(t)
	before := goroutines(t, metrics)
	var b strings.Builder
	b.WriteByte('[')
	for i := range 200000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i+100)
	}
	b.WriteByte(']')
	// No Mcp-Protocol-Version: the SDK then takes 2025-03-26, which had batches; a
	// client may also name that version.
	for _, hdr := range [][]string{nil, {"Mcp-Protocol-Version", "2025-03-26"}} {
		status, c := rawMCPPost(t, s, s.tokens["acme"], cs.ID(), b.String(), hdr...)
		if !strings.Contains(status, " 400 ") {
			peak := 0
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
				peak = max(peak, goroutines(t, metrics))
			}
			t.Errorf("a batch of 200000 pings %v: %q; want 400 (the daemon's goroutines went from %d to %d)", hdr, status, before, peak)
		}
		c.Close()
	}
	// The session still serves its client.
	var r execResult
	servedCall(t, cs, "exec", map[string]any{"command": "echo alive"}, &r)
	if r.Stdout != "alive\n" {
		t.Errorf("exec after the batches: %+v", r)
	}
}

// TestRedMCPRoles: only an agent credential reaches /v1/mcp. The tenant's own
// approver and auditor (a certificate with both roles) get 403 opening a session and
// 403 naming the agent's live one, on every method; another tenant's approver too.
// The agent cannot approve the gate its own MCP session asked for (403, the request
// stays pending), and the call ends only with the approver's answer.
func TestRedMCPRoles(t *testing.T) {
	testutil.RequireBwrap(t)
	base := shortTempDir(t) + "/base.yaml"
	mustWrite(t, base, serveGateContract)
	s := startServeWith(t, "    base_contract: "+base+"\n")
	stopSessionsAtEnd(t, s)
	url := "https://" + s.addr + api.MCP
	leadCert, _, _ := s.ca.issue(t, "lead.acme", false)
	betaLead, _, _ := s.ca.issue(t, "lead.beta", false)
	cs := s.acmeMCP(t)
	hdr := append([]string{"Mcp-Protocol-Version", "2025-06-18"}, mcpHeaders...)
	for name, c := range map[string]*http.Client{"acme's approver+auditor": s.client(leadCert), "beta's approver+auditor": s.client(betaLead)} {
		if code, body, _ := do(t, c, "POST", url, "", strings.NewReader(mcpInitialize), mcpHeaders...); code != http.StatusForbidden {
			t.Errorf("%s opens an MCP session: %d %s; want 403", name, code, body)
		}
		for _, m := range []struct{ method, body string }{{"POST", crossingCall}, {"GET", ""}, {"DELETE", ""}} {
			code, body, _ := do(t, c, m.method, url, "", strings.NewReader(m.body), append(hdr, "Mcp-Session-Id", cs.ID())...)
			if code != http.StatusForbidden && code != http.StatusNotFound {
				t.Errorf("%s %s on acme's MCP session: %d %s; want 403", name, m.method, code, body)
			}
		}
	}
	var r execResult
	servedCall(t, cs, "exec", map[string]any{"command": "test ! -e stolen.txt && echo untouched"}, &r)
	if r.Stdout != "untouched\n" {
		t.Fatalf("the session after the others' attempts: %+v", r)
	}

	done := make(chan *gomcp.CallToolResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		res, err := cs.CallTool(ctx, &gomcp.CallToolParams{Name: "gate", Arguments: map[string]any{"name": "hello"}})
		if err != nil {
			res = &gomcp.CallToolResult{IsError: true, Content: []gomcp.Content{&gomcp.TextContent{Text: err.Error()}}}
		}
		done <- res
	}()
	lead := apiCall{base: "https://" + s.addr, c: s.client(leadCert)}
	agent := apiCall{base: "https://" + s.addr, c: s.client(), tok: s.tokens["acme"]}
	p := pendingOf(t, lead, r.Session, 1)[0]
	for verb, body := range map[string]string{"approve": "", "deny": `{"why":"me"}`} {
		if code, body := agent.do(t, "POST", "/v1/gates/"+p.ID+"/"+verb, body); code != http.StatusForbidden {
			t.Errorf("the agent %ss its own gate: %d %s; want 403", verb, code, body)
		}
	}
	select {
	case res := <-done:
		t.Fatalf("the gate call ended without an approver: %s", resultText(res))
	default:
	}
	if got := pendingOf(t, lead, r.Session, 1); got[0].ID != p.ID {
		t.Errorf("pending after the agent's attempts: %+v", got)
	}
	if code, body := lead.do(t, "POST", "/v1/gates/"+p.ID+"/deny", `{"why":"no"}`); code != http.StatusOK {
		t.Fatalf("deny: %d %s", code, body)
	}
	select {
	case res := <-done:
		if !res.IsError {
			t.Errorf("the denied gate call: %s; want a tool error", resultText(res))
		}
	case <-time.After(time.Minute):
		t.Fatal("the gate call did not end a minute after its denial")
	}
}

// TestRedMCPAbandoned: a client opens as many MCP sessions as its tenant's sessions
// quota lets it (one more is 429), starts a command in one, drops the connection
// mid-call and never comes back. Within quotas.mcp_idle every session is stopped and
// its log sealed, the command is gone, no supervisor or sandbox of the tenant is left
// running, and the quota is free again.
func TestRedMCPAbandoned(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServeWith(t, "    quotas: {sessions: 3, mcp_idle: 6s}\n")
	stopSessionsAtEnd(t, s)
	m := &mcpServe{t: t, s: s, url: "https://" + s.addr + api.MCP, acme: s.tcpClient("acme")}
	proto := []string{"Mcp-Protocol-Version", "2025-06-18"}
	var sids []string
	for range 3 {
		code, body, hdr := m.post("?backend=bwrap", s.tokens["acme"], mcpInitialize)
		if code != http.StatusOK || hdr.Get("Mcp-Session-Id") == "" {
			t.Fatalf("initialize: %d %s", code, body)
		}
		sids = append(sids, hdr.Get("Mcp-Session-Id"))
	}
	// Each session named in a request just now: none is past mcp_idle for the fourth.
	initialized := `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	for _, sid := range sids {
		if code, body, _ := m.post("", s.tokens["acme"], initialized, append(proto, "Mcp-Session-Id", sid)...); code != http.StatusAccepted {
			t.Fatalf("initialized: %d %s", code, body)
		}
	}
	if code, body, _ := m.post("", s.tokens["acme"], mcpInitialize); code != http.StatusTooManyRequests || !strings.Contains(body, `"quota":"sessions"`) {
		t.Errorf("a fourth MCP session with a quota of 3: %d %s; want 429 naming sessions", code, body)
	}
	marker := "sleep " + uniq("71")
	call := fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"exec","arguments":{"command":"%s"}}}`, marker)
	c := rawMCPSend(t, s, s.tokens["acme"], sids[0], call, proto...)
	waitFor(t, 30*time.Second, "the call's command to run", func() bool { return len(processesRunning(marker)) > 0 })
	c.Close() // the client is gone mid-call

	var list api.SessionList
	root := s.tenantRoot("acme")
	waitFor(t, time.Minute, "every session of the vanished client to stop within mcp_idle (6s), and its processes to end", func() bool {
		_, lb := m.acme.call(t, "GET", "/v1/sessions", nil)
		list = api.SessionList{}
		if json.Unmarshal([]byte(lb), &list) != nil || len(list.Sessions) != 3 {
			t.Fatalf("sessions: %s; want the 3", lb)
		}
		for _, ss := range list.Sessions {
			if ss.State != "stopped" {
				return false
			}
		}
		return len(processesRunning(marker)) == 0 && len(processesWhere(root, strings.Contains)) == 0
	})
	if left := processesWhere(root, strings.Contains); len(left) > 0 {
		t.Errorf("processes of the tenant left: %s", describeProcesses(left))
	}
	audit := filepath.Join(root, "audit")
	for _, ss := range list.Sessions {
		v := runResult(t, exec.Command(testutil.Cordon(t), "audit", "verify", ss.ID, "--audit-dir", audit), "audit verify")
		if v.code != 0 || !strings.Contains(v.stdout, ss.ID+": intact and sealed") {
			t.Errorf("cordon audit verify %s: %s; want intact and sealed", ss.ID, v)
		}
	}
	for _, sid := range sids {
		ping := `{"jsonrpc":"2.0","id":9,"method":"ping"}`
		if code, body, _ := m.post("", s.tokens["acme"], ping, append(proto, "Mcp-Session-Id", sid)...); code != http.StatusNotFound {
			t.Errorf("the abandoned MCP session %s: %d %s; want 404", sid, code, body)
		}
	}
	again, err := s.mcpServed(t, s.tokens["acme"], "?backend=bwrap")
	if err != nil {
		t.Fatalf("connect once the abandoned sessions ended: %v", err)
	}
	_ = again.Close()
}

// TestRedMCPHostileFiles: the sandbox plants links to the host's files and
// directories (the daemon's config, its directory) and files with hostile names and
// contents; the file tools act inside the sandbox: they never read, write, edit or
// list the host's through a link or an absolute path, and a hostile name or content
// comes back as data, the session still served.
func TestRedMCPHostileFiles(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServe(t)
	stopSessionsAtEnd(t, s)
	cs := s.acmeMCP(t)
	dir := filepath.Dir(s.file)
	config, _ := os.ReadFile(s.file)
	plant := fmt.Sprintf(`ln -s %s cfg && ln -s %s host && ln -s / slash && printf 'a\033[2J\033]0;pwn\007b\377\376c\n' > esc.txt && printf 'x\000y' > nul.bin && touch "$(printf 'n\033[31m\nforged.txt')"`, s.file, dir)
	var r execResult
	servedCall(t, cs, "exec", map[string]any{"command": plant}, &r)
	if r.ExitCode != 0 {
		t.Fatalf("planting: %+v", r)
	}
	call := func(name string, args map[string]any) (*gomcp.CallToolResult, string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		res, err := cs.CallTool(ctx, &gomcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s %v: %v", name, args, err)
		}
		data, _ := json.Marshal(res)
		return res, string(data)
	}
	for _, p := range []string{"cfg", s.file, "host/serve.yaml", "slash" + s.file, filepath.Join(dir, "server.key")} {
		if _, got := call("read_file", map[string]any{"path": p}); strings.Contains(got, "token_sha256") || strings.Contains(got, "PRIVATE KEY") {
			t.Errorf("read_file %s read the host's file: %.300s", p, got)
		}
		call("write_file", map[string]any{"path": p, "content": "pwned"})
		call("edit_file", map[string]any{"path": p, "old_text": "tenants", "new_text": "pwned"})
	}
	call("write_file", map[string]any{"path": "host/planted", "content": "pwned"})
	if now, _ := os.ReadFile(s.file); string(now) != string(config) {
		t.Errorf("the daemon's config changed through the sandbox's links:\n%s", now)
	}
	if _, err := os.Stat(filepath.Join(dir, "planted")); err == nil {
		t.Error("write_file through a link wrote into the host's directory")
	}
	for _, p := range []string{"host", dir, "slash" + dir} {
		// Only names the tools did not write above: those the sandbox has of its own.
		res, _ := call("list_files", map[string]any{"path": p, "recursive": true})
		for _, line := range strings.Split(resultText(res), "\n") {
			if strings.HasSuffix(line, "ca.pem") || strings.HasSuffix(line, "server.pem") || line == "beta/" || line == "run/" {
				t.Errorf("list_files %s listed the host's %s", p, line)
			}
		}
	}
	if res, _ := call("read_file", map[string]any{"path": "nul.bin"}); !res.IsError {
		t.Errorf("read_file of a binary file: %s; want refused", resultText(res))
	}
	res, _ := call("list_files", map[string]any{"path": "."})
	if strings.Contains(resultText(res), "\nforged.txt\n") {
		t.Errorf("a file's name forged a line of list_files' text: %q", resultText(res))
	}
	res, got := call("read_file", map[string]any{"path": "esc.txt"})
	if !json.Valid([]byte(got)) {
		t.Errorf("read_file of hostile bytes: not JSON: %q", got)
	}
	_ = res
	servedCall(t, cs, "exec", map[string]any{"command": "echo alive"}, &r)
	if r.Stdout != "alive\n" {
		t.Errorf("exec after the hostile files: %+v", r)
	}
}

// TestRedMCPEndMidCall: an MCP session ends while a call runs a command that would
// run for hours: its client's DELETE is answered within seconds, the session stopped
// and sealed, the command gone; a client that drops the call's connection ends its
// command; the daemon told to stop (SIGTERM) with such a call in
// flight stops within its grace and leaves the session stopped and sealed, not
// running with no client able to reach it.
func TestRedMCPEndMidCall(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServe(t)
	stopSessionsAtEnd(t, s)
	acme := s.tcpClient("acme")
	audit := filepath.Join(s.tenantRoot("acme"), "audit")
	sealed := func(id string) {
		t.Helper()
		if got := acme.session(t, id); got.State != "stopped" {
			t.Errorf("session %s: %+v; want stopped", id, got)
		}
		v := runResult(t, exec.Command(testutil.Cordon(t), "audit", "verify", id, "--audit-dir", audit), "audit verify")
		if v.code != 0 || !strings.Contains(v.stdout, id+": intact and sealed") {
			t.Errorf("cordon audit verify %s: %s; want intact and sealed", id, v)
		}
	}
	// midCall connects, runs a call of a long sleep, and returns the session's id,
	// the client and the sleep's marker once the sleep runs.
	midCall := func(n string) (string, *gomcp.ClientSession, string) {
		cs, err := s.mcpServed(t, s.tokens["acme"], "?backend=bwrap")
		if err != nil {
			t.Fatalf("connect: %v\n%s", err, s.stderr)
		}
		var r execResult
		servedCall(t, cs, "exec", map[string]any{"command": "true"}, &r)
		marker := "sleep " + uniq(n)
		go cs.CallTool(context.Background(), &gomcp.CallToolParams{Name: "exec", Arguments: map[string]any{"command": marker}})
		waitFor(t, 30*time.Second, "the call's command to run", func() bool { return len(processesRunning(marker)) > 0 })
		return r.Session, cs, marker
	}

	id, cs, marker := midCall("72")
	url := "https://" + s.addr + api.MCP
	hdr := append([]string{"Mcp-Session-Id", cs.ID(), "Mcp-Protocol-Version", "2025-06-18"}, mcpHeaders...)
	start := time.Now()
	code, body, _ := do(t, acme.c, "DELETE", url, s.tokens["acme"], nil, hdr...)
	if code/100 != 2 || time.Since(start) > 30*time.Second {
		t.Errorf("DELETE mid-call: %d %s after %v; want 2xx within seconds", code, body, time.Since(start))
	}
	waitFor(t, 30*time.Second, "the command to end", func() bool { return len(processesRunning(marker)) == 0 })
	sealed(id)

	// A client that goes away mid-call, its MCP session left open: the command ends
	// with the POST, long before mcp_idle (10 minutes) would end the session.
	cs, err := s.mcpServed(t, s.tokens["acme"], "?backend=bwrap")
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer cs.Close()
	marker = "sleep " + uniq("74")
	call := fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"exec","arguments":{"command":"%s"}}}`, marker)
	c := rawMCPSend(t, s, s.tokens["acme"], cs.ID(), call, "Mcp-Protocol-Version", "2025-06-18")
	waitFor(t, 30*time.Second, "the call's command to run", func() bool { return len(processesRunning(marker)) > 0 })
	c.Close()
	waitFor(t, 30*time.Second, "the command of a client gone mid-call to end", func() bool { return len(processesRunning(marker)) == 0 })

	id, _, marker = midCall("73")
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.done:
	case <-time.After(time.Minute):
		t.Fatalf("the daemon did not stop within a minute of SIGTERM with a call in flight:\n%s", s.stderr)
	}
	waitFor(t, 30*time.Second, "the command to end", func() bool { return len(processesRunning(marker)) == 0 })
	s.launch(t)
	acme = s.tcpClient("acme")
	sealed(id)
}

// TestRedMCPBigBodies: 32 calls at once (two sessions' worth) of an exec with 8 MiB
// of stdin its command never reads, each held as long as the command runs: the
// tenant's MCP messages in flight are bounded (429 naming mcp_bodies past them), and
// the daemon's memory stays far from the 1.7 GiB they took when they were not.
func TestRedMCPBigBodies(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServe(t)
	stopSessionsAtEnd(t, s)
	metrics := s.metricsAddr(t)
	rss := func() int {
		m := regexp.MustCompile(`(?m)^process_resident_memory_bytes (\S+)`).FindStringSubmatch(scrapeMetrics(t, metrics))
		if m == nil {
			t.Fatal("no process_resident_memory_bytes in the metrics")
		}
		f, _ := strconv.ParseFloat(m[1], 64)
		return int(f) >> 20
	}
	var sids []string
	for range 2 {
		cs := s.acmeMCP(t)
		sids = append(sids, cs.ID())
	}
	before := rss()
	stdin := strings.Repeat("a", 8<<20-1)
	var conns []*tls.Conn
	for i := range 32 {
		// Concatenated, not formatted: each copy of 8 MiB is slow under -race.
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"exec","arguments":{"command":"sleep 40","stdin":"`, 1000+i) + stdin + `"}}}`
		conns = append(conns, rawMCPSend(t, s, s.tokens["acme"], sids[i%2], body, "Mcp-Protocol-Version", "2025-06-18"))
	}
	// The calls admitted hold their messages as long as their commands run (40 s):
	// sampled for 8 s, and the daemon's peak (VmHWM) at the end, which no sample can
	// miss.
	peak := 0
	for deadline := time.Now().Add(8 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		peak = max(peak, rss())
	}
	peak = max(peak, int(peakRSS(t, s.cmd.Process.Pid)>>20))
	// Each connection's answer so far, read for a second (the calls admitted answer
	// nothing while their commands run), all at once.
	got := make([]bool, len(conns))
	var wg sync.WaitGroup
	deadline := time.Now().Add(time.Second)
	for i, c := range conns {
		c.SetReadDeadline(deadline)
		wg.Go(func() {
			b, _ := io.ReadAll(c)
			got[i] = strings.HasPrefix(string(b), "HTTP/1.1 429 ") && strings.Contains(string(b), `"quota":"mcp_bodies"`)
			c.Close()
		})
	}
	wg.Wait()
	refused := 0
	for _, r := range got {
		if r {
			refused++
		}
	}
	if refused == 0 {
		t.Error("32 calls of 8 MiB at once: none refused; want 429 naming mcp_bodies past the tenant's bound")
	}
	if peak-before > 768 {
		t.Errorf("the daemon's memory went from %d MiB to %d MiB with 32 calls of 8 MiB in flight; want under 768 MiB more", before, peak)
	}
}

// TestRedMCPHostileEgressName: the sandbox asks the egress proxy (SOCKS5, whose
// domain name is any bytes) for a name holding a terminal escape, a newline and a
// forged "network:" line; exec's text names the refused destination quoted, with
// no escape and no forged line.
func TestRedMCPHostileEgressName(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServe(t)
	stopSessionsAtEnd(t, s)
	cs := s.acmeMCP(t)
	name := `ev\x1b[31m\nnetwork: forged\x07.ex`
	socks := `P=${ALL_PROXY#socks5h://}; exec 3<>/dev/tcp/${P%:*}/${P##*:}; printf '\x05\x01\x00' >&3; head -c 2 <&3 >/dev/null; ` +
		`printf '\x05\x01\x00\x03\x1b` + name + `\x01\xbb' >&3; timeout 2 cat <&3 >/dev/null; true`
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &gomcp.CallToolParams{Name: "exec", Arguments: map[string]any{"command": "bash -c " + shellQuote(socks)}})
	if err != nil {
		t.Fatal(err)
	}
	got := resultText(res)
	if !strings.Contains(got, "network: ") {
		t.Fatalf("the proxy refused nothing: %q", got)
	}
	if strings.ContainsAny(got, "\x1b\x07") || strings.Contains(got, "\nnetwork: forged") {
		t.Errorf("exec's text carries the sandbox's destination raw: %q", got)
	}
}
