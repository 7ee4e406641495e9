package integration

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

// TestRT7MCPNotificationFlood: notifications have no answer, so no bound on answers
// waiting holds them back; a client that writes them as fast as it can for 20s, with
// a slow call running, must not grow cordon mcp's memory with them.
func TestRT7MCPNotificationFlood(t *testing.T) {
	w := newWorld(t)
	m := w.startRawMCP()
	id := mcpSessionOf(t, m)
	pid := m.cmd.Process.Pid
	before := procStatus(t, pid, "VmRSS")
	m.send(`{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"exec","arguments":{"command":"sleep 12"}}}`)
	if err := m.in.SetWriteDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	note := strings.Repeat(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"nope","reason":"x"}}`+"\n", 40)
	sent := 0
	var werr error
	for sent < 10000000 {
		if _, werr = m.in.WriteString(note); werr != nil {
			break
		}
		sent += 40
	}
	after := procStatus(t, pid, "VmRSS")
	t.Logf("wrote %d notifications (%v); cordon mcp RSS %d MiB before, %d MiB after", sent, werr, before>>20, after>>20)
	if after-before > 128<<20 {
		t.Errorf("cordon mcp grew by %d MiB on notifications", (after-before)>>20)
	}
	if werr != nil && !errors.Is(werr, os.ErrDeadlineExceeded) {
		t.Errorf("writing notifications: %v; stderr %s", werr, m.stderr)
	}
	m.in.Close()
	w.assertSessionEnded(id)
}
