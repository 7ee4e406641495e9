package integration

import (
	"strings"
	"testing"
	"time"
)

// TestRT7MCPBackgroundOutlives: exec starts processes meant to outlive the call and
// the session (a setsid daemon, a background child holding the call's stdout), and
// the file tools look at process 1 through /proc. The call returns within its
// timeout, process 1's environment and descriptors are not read, and when the client
// is killed (kill -9) nothing of the session is left on the host.
func TestRT7MCPBackgroundOutlives(t *testing.T) {
	w := newWorld(t)
	m := w.startMCP()
	id := m.sessionID()

	m.ok("exec", map[string]any{"command": "setsid sh -c 'exec sleep 876543' </dev/null >/dev/null 2>&1 &"}, nil)
	start := time.Now()
	res := m.call("exec", map[string]any{"command": "sleep 876544 & echo started", "timeout_seconds": 5})
	t.Logf("a background child holding stdout: the call took %v: %s", time.Since(start).Round(time.Millisecond), resultText(res))
	if time.Since(start) > 30*time.Second {
		t.Errorf("the call held past its 5s timeout")
	}
	var r execResult
	m.ok("exec", map[string]any{"command": "ps -eo pid,args 2>/dev/null || ls /proc"}, &r)
	t.Logf("in the sandbox: %s", r.Stdout)

	for _, p := range []string{"/proc/1/environ", "/proc/1/cmdline", "/proc/1/root/etc/hostname", "/proc/1/mem"} {
		res := m.call("read_file", map[string]any{"path": p})
		t.Logf("read_file %s: error %v: %.200s", p, res.IsError, resultText(res))
		if txt := resultText(res); strings.Contains(txt, "permission denied") && !strings.Contains(txt, "may not read") {
			t.Errorf("read_file %s: a refused read is explained as a write: %s", p, txt)
		}
		if txt := resultText(res); strings.Contains(txt, "CORDON") || strings.Contains(txt, "secret") || strings.Contains(txt, "ghp_") {
			t.Errorf("read_file %s gave process 1's secrets: %s", p, txt)
		}
	}
	res = m.call("list_files", map[string]any{"path": "/proc/1/fd"})
	t.Logf("list_files /proc/1/fd: error %v: %.300s", res.IsError, resultText(res))
	if !res.IsError {
		t.Errorf("list_files listed process 1's descriptors: %s", resultText(res))
	}

	_ = m.cmd.Process.Kill()
	w.assertSessionEnded(id)
	if left := processesMatching("87654"); len(left) > 0 {
		t.Errorf("left behind after the session: %s", describeProcesses(left))
	}
}
