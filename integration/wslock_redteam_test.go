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

// Red team of the workspace lock (lockWorkspace, fb1c78a): one live direct run per
// workspace tree. Each test gets two runs' sandboxes live in one tree and has one
// defeat the other's mask; it fails while they can.

// TestWorkspaceInsideAnotherThroughBindMount: run A's workspace is a bind mount of a
// subdirectory (sub) of C's workspace: a container's or VM's shared folder, a second
// checkout path. The lock holds A's workspace directory itself (the same directory as
// C's sub) but the directories above it are the mount point's ancestors, not sub's:
// C's workspace, which holds A's, is never locked. C must be refused while A runs;
// otherwise C's sandbox removes A's .envrc placeholder on the host (to C's
// contract, the default, sub/.envrc is an ordinary path) and A's sandbox creates the .envrc its contract denies,
// which direnv runs on the host.
func TestWorkspaceInsideAnotherThroughBindMount(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	sub := filepath.Join(w.ws, "sub")
	mustMkdir(t, sub)
	alias := filepath.Join(t.TempDir(), "alias")
	mustMkdir(t, alias)
	if out, err := exec.Command("mount", "--bind", sub, alias).CombinedOutput(); err != nil {
		t.Fatalf("mount --bind: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", alias).Run() })
	dir := t.TempDir()
	aContract, cContract := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "c.yaml")
	mustWrite(t, aContract, "version: 1\nworkspace: "+alias+"\n")
	mustWrite(t, cContract, "version: 1\nworkspace: "+w.ws+"\n")

	// A: the default contract, which keeps .envrc from being created. It waits for C.
	out := filepath.Join(t.TempDir(), "a.out")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a := exec.Command(testutil.Cordon(t), "run", "-c", aContract, "--", "sh", "-c",
		"touch a-ready; while [ ! -e go-a ]; do sleep 0.05; done; echo 'echo pwned' > .envrc; echo write=$?")
	a.Dir, a.Env, a.Stdout, a.Stderr = alias, w.env, f, f
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if a.ProcessState == nil {
			a.Process.Kill()
			a.Wait()
		}
	}()
	waitFor(t, time.Minute, "run A's command", func() bool { return exists(filepath.Join(sub, "a-ready")) })

	c := exec.Command(testutil.Cordon(t), "run", "-c", cContract, "--", "sh", "-c",
		"rm -rf sub/.envrc && [ ! -e sub/.envrc ] && echo removed")
	c.Dir, c.Env = w.ws, w.env
	r := runResult(t, c, "cordon")
	t.Logf("run C: %v", r)
	refusedInUse(t, "run C, whose workspace holds run A's (through "+alias+")", r)

	mustWrite(t, filepath.Join(sub, "go-a"), "")
	a.Wait()
	aOut, _ := os.ReadFile(out)
	t.Logf("run A: %s", aOut)
	if data, _ := os.ReadFile(filepath.Join(sub, ".envrc")); strings.Contains(string(data), "pwned") || strings.Contains(string(aOut), "write=0") {
		t.Errorf("run A's sandbox wrote .envrc, which its contract denies, on the host (%q) once run C's sandbox had removed its placeholder", data)
	}
}
