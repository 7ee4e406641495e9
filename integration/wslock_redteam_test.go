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

// TestDirectRunInsideStagedRunsWorkspace: staged run A denies the missing
// a/b/secret. A staged run holds its workspace shared, and a direct run holds the
// directories above its own shared too, so a direct run C whose workspace is A's
// subdirectory a is let in beside A. C's sandbox removes, on the host, what A made
// for its denial (a/b and the placeholder); A's sandbox then writes a/b/secret, and
// `cordon apply` must not land it on the host.
func TestDirectRunInsideStagedRunsWorkspace(t *testing.T) {
	w := newWorld(t)
	dir := t.TempDir()
	aContract, cContract := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "c.yaml")
	mustWrite(t, aContract, "version: 1\nworkspace: "+w.ws+"\nfilesystem:\n  deny_read: [a/b/secret]\n")
	mustMkdir(t, filepath.Join(w.ws, "a"))
	mustWrite(t, cContract, "version: 1\nworkspace: "+filepath.Join(w.ws, "a")+"\n")
	out := filepath.Join(t.TempDir(), "a.out")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a := exec.Command(testutil.Cordon(t), "run", "--stage", "-c", aContract, "--", "sh", "-c",
		`touch a-ready; i=0; while [ $i -lt 100 ]; do if (mkdir -p a/b; echo pwned > a/b/secret) 2>/dev/null; then echo write=0; break; fi; sleep 0.05; i=$((i+1)); done`)
	a.Dir, a.Env, a.Stdout, a.Stderr = w.ws, w.env, f, f
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if a.ProcessState == nil {
			a.Process.Kill()
			a.Wait()
		}
	}()
	waitFor(t, time.Minute, "staged run A's command", func() bool {
		m, _ := filepath.Glob(filepath.Join(w.home, ".local", "state", "cordon", "runs", "*", "stage", "upper", "a-ready"))
		m2, _ := filepath.Glob(filepath.Join(w.runRoot, "*", "stage", "upper", "a-ready"))
		return len(m)+len(m2) > 0
	})
	t.Logf("host a/ while A runs: %v", lsTree(filepath.Join(w.ws, "a")))
	c := exec.Command(testutil.Cordon(t), "run", "-c", cContract, "--", "sh", "-c", "rm -rf b && echo removed")
	c.Dir, c.Env = filepath.Join(w.ws, "a"), w.env
	r := runResult(t, c, "cordon")
	t.Logf("run C: %v", r)
	refusedInUse(t, "direct run C in a subdirectory of staged run A's workspace", r)
	a.Wait()
	data, _ := os.ReadFile(out)
	aOut := string(data)
	t.Logf("run A: %s", aOut)
	if m := stagedRunID.FindStringSubmatch(aOut); m != nil {
		t.Logf("apply: %v", w.cordon("", "apply", m[1]))
	}
	if strings.Contains(aOut, "write=0") {
		t.Errorf("run A's sandbox wrote a/b/secret, which its contract denies, in its staged view")
	}
	if data, _ := os.ReadFile(filepath.Join(w.ws, "a", "b", "secret")); strings.Contains(string(data), "pwned") {
		t.Errorf("cordon apply landed run A's a/b/secret, which its contract denies, on the host")
	}
}

func lsTree(dir string) []string {
	var l []string
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			l = append(l, p[len(dir):]+" "+fi.Mode().String())
		}
		return nil
	})
	return l
}
