package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/testutil"
)

// TestMCPUnreadAnswersAfterInputEnds: a client sends calls whose answers fill the
// stdout pipe, then closes its input, and never reads: cordon mcp stops the session (its log
// sealed) once an answer has waited unread for a while (10 s), instead of keeping it,
// and its sandbox, up for as long as the client lives.
func TestMCPUnreadAnswersAfterInputEnds(t *testing.T) {
	testutil.RequireBwrap(t)
	w := newWorld(t)
	m := w.startRawMCP()
	for id := 1; id <= 3; id++ { // each answer holds 150,000 characters: past a pipe's 64 KiB
		call := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"exec","arguments":{"command":"head -c 150000 /dev/zero | tr '\\0' a","max_output_chars":200000}}}`, id)
		if err := m.send(call); err != nil {
			t.Fatal(err)
		}
	}
	// The answers fill the pipe (64 KiB) while the input is still open: a write of
	// cordon mcp's is blocked when the client closes its input.
	waitFor(t, time.Minute, "the answers to fill the stdout pipe", func() bool {
		n, err := linux.Queued(m.outF)
		return err == nil && n >= 60000
	})
	m.in.Close()
	exited := make(chan error, 1)
	go func() { exited <- m.cmd.Wait() }()
	select {
	case err := <-exited:
		t.Logf("cordon mcp ended: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatalf("cordon mcp still runs 2 minutes after its client closed its input without reading an answer; stderr: %s", m.stderr)
	}
	if s := m.stderr.String(); !strings.Contains(s, "stopped, its log sealed") || !strings.Contains(s, "has read no answer") {
		t.Errorf("cordon mcp's stderr does not say the session stopped for the unread answers: %s", s)
	}
}
