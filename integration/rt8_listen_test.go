package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
)

// TestRT8MCPAbandonedListens: a request that is not a tool call but that the MCP
// SDK holds open, MCP 2026-07-28's subscriptions/listen (chosen per request by its
// _meta, on a session initialized as 2025-06-18), sent on a POST the client then
// closes, must end with that POST, as a tool call does. Otherwise each one leaves a
// handler parked for the rest of the session, and a client that keeps posting them
// (and so is never idle) grows the daemon every tenant shares without bound.
func TestRT8MCPAbandonedListens(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServe(t)
	stopSessionsAtEnd(t, s)
	metrics := s.metricsAddr(t)
	cs := s.acmeMCP(t)
	before := goroutines(t, metrics)
	const posts = 200
	for i := range posts {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},`+
			`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, 1000+i)
		c := rawMCPSend(t, s, s.tokens["acme"], cs.ID(), body)
		buf := make([]byte, 512)
		n, _ := c.Read(buf) // the status line at least: the POST was served
		if i == 0 {
			t.Logf("first answer: %q", buf[:n])
		}
		c.Close()
	}
	// Each closed POST's handler ends once the daemon sees the close: wait for the
	// count to come back near where it was, or report where it stays.
	var now int
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		now = goroutines(t, metrics)
		if now < before+posts/4 || time.Now().After(deadline) {
			break
		}
	}
	if now >= before+posts/4 {
		t.Errorf("%d subscriptions/listen POSTs, each closed: the daemon's goroutines went from %d to %d and stayed", posts, before, now)
	}
	var r execResult
	servedCall(t, cs, "exec", map[string]any{"command": "echo alive"}, &r)
	if strings.TrimSpace(r.Stdout) != "alive" {
		t.Errorf("exec after the listens: %+v", r)
	}
}
