package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
)

// Red-team attacks on the masks of protected workspace paths (.envrc and the like)
// once a host tool removed the entry a mask rested on: the live watch and the
// end-of-command check that rename aside what the sandbox put there.

// maskRace runs `sh -c script` under cordon in w's workspace; once the script has
// made ./ready, onHost runs, then ./go is made for the script to go on. It returns
// the run's cordon and output.
func maskRace(t *testing.T, w *world, script string, onHost func()) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(testutil.Cordon(t), "run", "--", "sh", "-c", script)
	cmd.Dir, cmd.Env = w.ws, w.env
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	go func() { _ = cmd.Wait(); close(ended) }()
	defer func() {
		cmd.Process.Kill()
		<-ended
	}()
	waitFor(t, 2*time.Minute, "the run's command", func() bool {
		select {
		case <-ended:
			t.Fatalf("the run ended before its command was ready: %s", out.String())
		default:
		}
		return exists(filepath.Join(w.ws, "ready"))
	})
	onHost()
	mustWrite(t, filepath.Join(w.ws, "go"), "")
	<-ended
	return cmd, out.String()
}

// TestRTMaskQuarantineNamesTaken: the rename aside of what stands at a mask's path
// tries PATH.cordon-quarantine, then -2 ... -100, never over an existing name
// (RENAME_NOREPLACE), and gives up after the hundredth. Those names are ordinary
// workspace paths the sandbox may write: it makes all hundred first. Then the host
// removes the .envrc placeholder (git clean -fdx), the sandbox writes its own .envrc,
// and neither the live watch nor the command's end can rename it aside: it is left
// on the host for direnv to run. Shows the quarantine name is the sandbox's to choose.
func TestRTMaskQuarantineNamesTaken(t *testing.T) {
	w := newWorld(t)
	hostGit(t, w.ws, "init", "-q")
	envrc := filepath.Join(w.ws, ".envrc")
	script := `touch .envrc.cordon-quarantine; i=2; while [ $i -le 100 ]; do touch .envrc.cordon-quarantine-$i; i=$((i+1)); done
touch ready; while [ ! -e go ]; do sleep 0.05; done; echo 'echo pwned' > .envrc; echo write=$?`
	_, got := maskRace(t, w, script, func() {
		if err := os.Remove(envrc); err != nil {
			t.Fatalf("removing the placeholder on the host: %v", err)
		}
	})
	t.Logf("the run:\n%s", got)
	if data, err := os.ReadFile(envrc); err == nil && strings.Contains(string(data), "pwned") {
		t.Fatalf("the sandbox's .envrc is on the host after the run (every quarantine name taken): %q", data)
	}
}
