package integration

import (
	"strings"
	"testing"
)

// TestRT7MCPHugeOutput: a command that prints 300 MB, on both streams, through exec
// with the smallest cap: cordon mcp's answer is cut at the cap and cordon mcp's own
// memory does not grow with the output (what is past the cap goes to the spill file,
// inside the sandbox's bounds, not through the host process).
func TestRT7MCPHugeOutput(t *testing.T) {
	w := newWorld(t)
	m := w.startRawMCP()
	id := mcpSessionOf(t, m)
	pid := m.cmd.Process.Pid
	before := procStatus(t, pid, "VmHWM")
	m.send(`{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"name":"exec","arguments":{"command":"head -c 150000000 /dev/zero | tr '\\0' a; head -c 150000000 /dev/zero | tr '\\0' b >&2","max_output_chars":100,"timeout_seconds":60}}}`)
	l := m.line()
	peak := procStatus(t, pid, "VmHWM")
	t.Logf("answer %d bytes; cordon mcp peak RSS %d MiB before, %d MiB after", len(l), before>>20, peak>>20)
	if len(l) > 64<<10 || !strings.Contains(l, `"id":"big"`) {
		t.Errorf("the answer to a capped exec is %d bytes: %.300s", len(l), l)
	}
	if peak-before > 64<<20 {
		t.Errorf("cordon mcp's peak memory grew by %d MiB for an output cut at 100 characters", (peak-before)>>20)
	}
	m.in.Close()
	w.assertSessionEnded(id)
}
