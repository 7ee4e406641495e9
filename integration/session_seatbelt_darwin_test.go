package integration

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSeatbeltSession: a session on seatbelt keeps its files and its background
// processes from one exec to the next, and its stop leaves nothing: not the background
// sleep (killed with its command's process group by process 1 when the runner hangs
// up), not the supervisor's socket, record or log.
func TestSeatbeltSession(t *testing.T) {
	w := newMacWorld(t)
	w.macContract(9) // any port: the commands make no connection
	const marker = "sleep 3218"
	id := w.startSession()
	if r := w.cordon("", "exec", id, "--", "sh", "-c", "echo one > src/state.txt; "+marker+" > /dev/null 2>&1 &"); r.code != 0 {
		t.Fatalf("exec 1: %v", r)
	}
	if r := w.cordon("", "exec", id, "--", "sh", "-c", "cat src/state.txt; exit 3"); r.code != 3 || r.stdout != "one\n" {
		t.Fatalf("exec 2: want exit 3 and the first command's file: %v", r)
	}
	if !running(marker) {
		t.Fatal("the first command's background sleep did not outlive it")
	}
	if r := w.cordon("", "exec", id, "--", "cat", filepath.Join(w.home, ".ssh", "id_rsa")); r.code == 0 || strings.Contains(r.stdout, "secret-key-material") {
		t.Fatalf("a session's command read the host's key: %v", r)
	}
	if r := w.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatalf("session stop: %v", r)
	}
	waitFor(t, 30*time.Second, "the background sleep to die with the session", func() bool { return !running(marker) })
	for _, ext := range []string{".sock", ".json", ".log"} {
		assertAbsent(t, filepath.Join(w.sessionsDir(), id+ext))
	}
	if r := w.cordon("", "audit", "verify", id); r.code != 0 {
		t.Fatalf("audit verify: %v", r)
	}
}
