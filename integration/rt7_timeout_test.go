package integration

import (
	"strings"
	"testing"
)

// TestRT7MCPTimeoutOverContract: the contract's commands.timeout is a reviewed grant
// (cordon contract diff calls a longer one wider). An agent over `cordon mcp` (stdio)
// asks exec for a timeout_seconds past it; the call is refused, and without one a
// command is still killed at the contract's timeout.
func TestRT7MCPTimeoutOverContract(t *testing.T) {
	w := newWorld(t)
	w.contract("version: 1\ncommands:\n  timeout: 1s\n")
	m := w.startMCP()
	id := m.sessionID()

	// Past the contract's timeout: refused before anything runs, naming the bound.
	txt := m.refused("exec", map[string]any{"command": "sleep 3; echo outlived-the-contract", "timeout_seconds": 5}, "timeout_seconds")
	if strings.Contains(txt, "outlived-the-contract") {
		t.Errorf("exec with timeout_seconds past the contract's 1s ran past it: %s", txt)
	}

	// Without one, the contract's timeout kills it.
	res := m.call("exec", map[string]any{"command": "sleep 3; echo outlived-the-contract"})
	if txt := resultText(res); !res.IsError || !strings.Contains(txt, "timed out") {
		t.Errorf("exec of sleep 3 under a 1s contract timeout: %s", txt)
	}
	// At the contract's timeout: still served.
	m.ok("exec", map[string]any{"command": "true", "timeout_seconds": 1}, nil)
	m.close()
	w.assertSessionEnded(id)
}
