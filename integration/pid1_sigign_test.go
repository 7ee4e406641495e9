package integration

import (
	"strings"
	"testing"
)

// TestCommandsStartWithNoSignalIgnored: process 1 is deaf to the signals commands could
// send it, but a command starts with every signal at its default, in a run and in a
// session: `yes | head` ends yes with SIGPIPE (141), not with a write error.
func TestCommandsStartWithNoSignalIgnored(t *testing.T) {
	t.Run("bwrap", noSignalIgnored)
	t.Run("engines", func(t *testing.T) {
		forEachContainerBackend(t, func(t *testing.T, _ string) { noSignalIgnored(t) })
	})
}

func noSignalIgnored(t *testing.T) {
	w := newWorld(t)
	script := "grep SigIgn /proc/self/status; yes | head -1 >/dev/null; echo \"yes=${PIPESTATUS[0]}\""
	want := "SigIgn:\t0000000000000000\nyes=141\n"
	if r := w.cordon("", "run", "--", "bash", "-c", script); r.code != 0 || r.stdout != want {
		t.Errorf("run: got %v; want stdout %q", r, want)
	}
	id := w.startSession()
	if r := w.cordon("", "exec", id, "--", "bash", "-c", script); r.code != 0 || r.stdout != want {
		t.Errorf("session exec: got %v; want stdout %q", r, want)
	}
	if r := w.cordon("", "session", "stop", id); r.code != 0 || strings.TrimSpace(r.stderr) != "" {
		t.Errorf("stop: %v", r)
	}
}
