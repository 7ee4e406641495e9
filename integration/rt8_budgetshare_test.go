package integration

import (
	"context"
	"crypto/tls"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cordonhq/cordon/internal/testutil"
	"github.com/cordonhq/cordon/server/api"
)

// TestRT8MCPBudgetShare: no set of tenants can take every other tenant's MCP. Four
// tenants each post messages that declare 64 MiB in all (24, 24 and 16) and send one
// byte ("{"), which the daemon charges in full to the MCP messages in flight (256 MiB
// over all tenants) for as long as the session's command timeout lets a body take:
// the whole server's budget held for nothing. A fifth tenant's first call must still be served, as a held
// request's first slot is (the held limiter's fair share), not refused 429
// server_mcp_bodies.
func TestRT8MCPBudgetShare(t *testing.T) {
	testutil.RequireBwrap(t)
	hostile := []string{"acme", "t3", "t4", "t5"}
	var extra strings.Builder
	tokens := map[string]string{}
	dir := shortTempDir(t)
	for _, name := range hostile[1:] {
		tok, sum := newToken(t)
		tokens[name] = tok
		fmt.Fprintf(&extra, "  - name: %s\n    root: %s\n    credentials:\n      - {name: ci, roles: [agent], token_sha256: %s}\n",
			name, filepath.Join(dir, name), sum)
	}
	s := startServeWith(t, extra.String())
	stopSessionsAtEnd(t, s)
	for name, tok := range tokens {
		s.tokens[name] = tok
	}
	t.Cleanup(func() {
		for _, name := range hostile[1:] {
			stopLeftSessions(t, filepath.Join(dir, name))
		}
	})
	declared := []int{24 << 20, 24 << 20, 16 << 20} // 64 MiB, the tenant's bound
	for _, tenant := range hostile {
		cs, err := s.mcpServed(t, s.tokens[tenant], "?backend=bwrap")
		if err != nil {
			t.Fatalf("%s: connect: %v\n%s", tenant, err, s.stderr)
		}
		defer cs.Close()
		for _, n := range declared {
			c, err := tls.Dial("tcp", s.addr, &tls.Config{InsecureSkipVerify: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
				"Accept: application/json, text/event-stream\r\nMcp-Protocol-Version: 2025-06-18\r\nMcp-Session-Id: %s\r\nContent-Length: %d\r\n\r\n{",
				api.MCP, s.addr, s.tokens[tenant], cs.ID(), n)
		}
	}
	// The budget is charged as the first byte is read, long before the fifth
	// tenant's session has started.
	cs, err := s.mcpServed(t, s.tokens["beta"], "?backend=bwrap")
	if err != nil {
		t.Fatalf("beta: connect while four tenants hold 256 MiB of declared, unsent bodies: %v", err)
	}
	defer cs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &gomcp.CallToolParams{Name: "exec", Arguments: map[string]any{"command": "echo served"}})
	if err != nil || res.IsError || !strings.Contains(resultText(res), "served") {
		t.Errorf("beta's call while four tenants hold 256 MiB of declared, unsent bodies: %v %v; want it served", err, res)
	}
}
