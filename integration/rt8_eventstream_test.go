package integration

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
	"github.com/cordonhq/cordon/server/api"
)

// TestRT8MCPEventStreamLasts: a served MCP session's standalone event stream (its
// GET) lasts as long as the session, not as long as a command may: the daemon cut it
// at the command timeout and its minute of margin, and the MCP Go SDK's client,
// which has no event id to resume from, counts each cut as a retry without progress
// and, past 5, fails the whole session; a client of the official SDK lost its served
// session after 12 minutes (6 cuts of 2 minutes) however busy it was. The stream
// still ends with its session. The margin is the response timeout
// (listen.timeouts.response), here 10 s (the least margin) rather than its default
// minute: the stream is
// held past the command timeout and the margin, where a POST is cut, and past the
// response timeout, where a request whose deadlines are not lifted is.
func TestRT8MCPEventStreamLasts(t *testing.T) {
	testutil.RequireBwrap(t)
	const timeout, margin = 2 * time.Second, 10 * time.Second
	base := filepath.Join(shortTempDir(t), "base.yaml")
	mustWrite(t, base, fmt.Sprintf("version: 1\ncommands: {timeout: %s}\n", timeout))
	s := startServeListen(t, fmt.Sprintf("  timeouts: {response: %s}\n", margin), "    base_contract: "+base+"\n")
	stopSessionsAtEnd(t, s)
	m := &mcpServe{t: t, s: s, url: "https://" + s.addr + api.MCP}
	proto := []string{"Mcp-Protocol-Version", "2025-06-18"}
	code, body, hdr := m.post("?backend=bwrap", s.tokens["acme"], mcpInitialize)
	sid := hdr.Get("Mcp-Session-Id")
	if code != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %s", code, body)
	}
	if code, body, _ := m.post("", s.tokens["acme"], `{"jsonrpc":"2.0","method":"notifications/initialized"}`, append(proto, "Mcp-Session-Id", sid)...); code != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", code, body)
	}
	c, err := tls.Dial("tcp", s.addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nAccept: text/event-stream\r\nMcp-Protocol-Version: 2025-06-18\r\nMcp-Session-Id: %s\r\n\r\n",
		api.MCP, s.addr, s.tokens["acme"], sid)
	br := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if status, err := br.ReadString('\n'); err != nil || !strings.Contains(status, " 200 ") {
		t.Fatalf("GET: %q %v", status, err)
	}
	// The command timeout and the margin pass, and as long again.
	held := 2 * (timeout + margin)
	c.SetReadDeadline(time.Now().Add(held))
	got, err := br.ReadString(0) // the stream holds no NUL: this reads until it ends
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || strings.Contains(got, "\r\n0\r\n\r\n") {
		t.Fatalf("the session's event stream, %s on: %v; want it still open", held, err)
	}
	// The session ends (the client's DELETE): its stream ends with it.
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if code, body, _ := do(t, s.client(), "DELETE", m.url, s.tokens["acme"], nil, append(proto, "Mcp-Session-Id", sid)...); code != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", code, body)
	}
	for { // until the chunked body's last chunk, or the connection's end
		line, err := br.ReadString('\n')
		if line == "0\r\n" || (err != nil && !(errors.As(err, &ne) && ne.Timeout())) {
			break
		}
		if err != nil {
			t.Fatalf("the event stream of a deleted session is still open")
		}
	}
}
