package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
)

// TestSeatbeltKilledCordon: a cordon that is SIGKILLed takes the sandbox's process
// group with it (the group watcher; macOS has no PDEATHSIG).
func TestSeatbeltKilledCordon(t *testing.T) {
	w := newMacWorld(t)
	w.macContract(9) // any port: the command makes no connection
	const marker = "sleep 3217"
	cmd := exec.Command(testutil.Cordon(t), "run", "--", "sh", "-c", marker+" & echo started > src/started; wait")
	cmd.Dir, cmd.Env = w.ws, w.env
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	started := filepath.Join(w.ws, "src", "started")
	waitFor(t, 30*time.Second, "the command to start", func() bool { _, err := os.Stat(started); return err == nil })
	if !running(marker) {
		t.Fatal("the sandboxed sleep is not running")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	waitFor(t, 30*time.Second, "the sandbox's sleep to die with the killed cordon", func() bool { return !running(marker) })
}

// running reports whether a process whose command line is cmdline exists.
func running(cmdline string) bool {
	return exec.Command("pgrep", "-f", "^"+cmdline+"$").Run() == nil
}
