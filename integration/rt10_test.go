package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Red team rt10: placeholders and their masks across a session's life, container
// backends, adoption, and the MCP gate tool's host-side account.

// rt10Flood is the sandbox's side of TestRT10SessionStopDropsMaskEvent: a process left
// in the background by a session's command waits for the host's signal (go, made once
// the host removed the .envrc placeholder), makes a contract in each of n directories
// (each one a rename on the host by the live watch, which backlogs its queue behind
// them), then writes the .envrc that direnv would run.
const rt10Flood = `mkdir flood && cd flood && seq 1 %N% | xargs mkdir && cd .. &&
setsid sh -c 'while [ ! -e go ]; do :; done
for k in 1 2 3; do (i=$k; while [ $i -lt %N% ]; do : > flood/$i/cordon.yaml; i=$((i+4)); done) & done
i=4; while [ $i -lt %N% ]; do : > flood/$i/cordon.yaml; i=$((i+4)); done
echo "echo pwned-by-the-sandbox" > .envrc
while :; do sleep 1; done' </dev/null >/dev/null 2>&1 &
echo started`

// TestRT10SessionStopDropsMaskEvent (held on b32618c: the watch kept up with four
// shell loops of the sandbox on the 2-core VM, and renamed the .envrc aside before the
// stop; kept as the attack's regression test): a session's live watch reads
// the fanotify queue behind the sandbox; `cordon session stop` kills the sandbox and
// then closes the watch (stopWatch) without reading what the kernel still queues, and
// no check of the masks runs at the stop (maskedGone runs at a command's end only).
// The host removes the .envrc placeholder during the session (git clean -fdx does;
// its mask in the sandbox goes with it); a process the session's command left behind
// backlogs the watch with contracts to disarm, then writes .envrc. A stop that comes
// while the watch is behind would leave the sandbox's .envrc in the workspace, never
// renamed aside, for direnv to run. A sandbox that floods faster than shell loops do
// (a compiled program, more cores) may win the race: the stop reads the queue to its
// end, or checks the masks once the sandbox is gone, to close it.
func TestRT10SessionStopDropsMaskEvent(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the live watch needs root")
	}
	w := newWorld(t)
	r := w.cordon("", "session", "start")
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || id == "" {
		t.Fatalf("session start: %v", r)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			w.cordon("", "session", "stop", id)
		}
	})
	envrc := filepath.Join(w.ws, ".envrc")
	if _, err := os.Lstat(envrc); err != nil {
		t.Fatalf("no .envrc placeholder on the host: %v", err)
	}
	script := strings.ReplaceAll(rt10Flood, "%N%", "6000")
	if r := w.cordon("", "exec", id, "--", "sh", "-c", script); r.code != 0 || !strings.Contains(r.stdout, "started") {
		t.Fatalf("exec: %v", r)
	}
	if err := os.Remove(envrc); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(w.ws, "go"), "")
	waitFor(t, 60*time.Second, "the sandbox's .envrc", func() bool {
		b, err := os.ReadFile(envrc)
		if err == nil && strings.Contains(string(b), "pwned") {
			return true
		}
		m, _ := filepath.Glob(envrc + ".cordon-quarantine*")
		return len(m) > 0
	})
	r = w.cordon("", "session", "stop", id)
	stopped = true
	t.Logf("stop: %v", r)
	if b, err := os.ReadFile(envrc); err == nil && strings.Contains(string(b), "pwned") {
		t.Fatalf("the sandbox's .envrc is left in the workspace after the stop, armed: %q", b)
	}
}
