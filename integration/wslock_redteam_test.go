package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
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
// otherwise C's sandbox removes A's .envrc placeholder on the host (to C's contract,
// the default, sub/.envrc is an ordinary path) and A's sandbox creates the .envrc its
// contract denies, which direnv runs on the host.
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

// TestSandboxMakesItsWorkspaceUnreadable: lockWorkspace skips a directory above the
// workspace that it cannot open for reading, on the ground that a run there could
// not read this workspace's tree. But search (x) without read (r) is enough to reach
// a directory below, and a run's sandbox may chmod its own workspace. Run A's hostile
// sandbox (cordon as an unprivileged user, whose sandbox is that user) makes its
// workspace 0311; the same user's run B in A's subdirectory x/y cannot open it, so B
// skips it and is let in beside A. A's sandbox then removes B's .envrc placeholder
// on the host and B's sandbox creates the .envrc its contract denies, which direnv
// runs on the host. B must be refused while A runs.
// nobodysWorld makes w's home, run root and the directories above its workspace
// usable by nobody (65534) and returns what makes a command cordon as nobody there.
func nobodysWorld(w *world) func(*exec.Cmd) {
	t := w.t
	xdg, err := os.MkdirTemp("/tmp", "xdg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(xdg) })
	for _, d := range []string{xdg, w.runRoot} {
		os.Chown(d, 65534, 65534)
	}
	filepath.Walk(w.home, func(p string, _ os.FileInfo, _ error) error { return os.Chown(p, 65534, 65534) })
	for d := filepath.Dir(w.ws); d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		os.Chmod(d, 0o755) // t.TempDir's parents are 0700
	}
	return func(cmd *exec.Cmd) {
		cmd.Env = append(w.env, "XDG_RUNTIME_DIR="+xdg)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
}

func TestSandboxMakesItsWorkspaceUnreadable(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	inner := filepath.Join(w.ws, "x", "y")
	mustMkdir(t, inner)
	for _, d := range []string{w.ws, filepath.Join(w.ws, "x"), inner} {
		os.Chown(d, 65534, 65534)
	}
	t.Cleanup(func() { os.Chmod(w.ws, 0o755) })
	asNobody := nobodysWorld(w)
	nobody := func(dir, script string, out *os.File) *exec.Cmd {
		cmd := exec.Command(testutil.Cordon(t), "run", "--", "sh", "-c", script)
		cmd.Dir = dir
		asNobody(cmd)
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				cmd.Process.Kill()
				cmd.Wait()
			}
		})
		return cmd
	}
	outs := t.TempDir()
	aOut, err := os.Create(filepath.Join(outs, "a.out"))
	if err != nil {
		t.Fatal(err)
	}
	defer aOut.Close()
	a := nobody(w.ws, "chmod 0311 .; touch a-ready; while [ ! -e go-a ]; do sleep 0.05; done; rm -rf x/y/.envrc; echo rm=$?; touch x/y/rm-done", aOut)
	waitFor(t, time.Minute, "run A's command", func() bool { return exists(filepath.Join(w.ws, "a-ready")) })
	if fi, err := os.Stat(w.ws); err != nil || fi.Mode().Perm() != 0o311 {
		t.Fatalf("run A's sandbox could not chmod its workspace: %v %v", fi, err)
	}

	bPath := filepath.Join(outs, "b.out")
	bOut, err := os.Create(bPath)
	if err != nil {
		t.Fatal(err)
	}
	defer bOut.Close()
	b := nobody(inner, "touch b-ready; while [ ! -e rm-done ]; do sleep 0.05; done; echo 'echo pwned' > .envrc; echo write=$?", bOut)
	bDone := make(chan struct{})
	go func() { b.Wait(); close(bDone) }()
	waitFor(t, time.Minute, "run B's command or its refusal", func() bool {
		select {
		case <-bDone:
			return true
		default:
			return exists(filepath.Join(inner, "b-ready"))
		}
	})
	mustWrite(t, filepath.Join(w.ws, "go-a"), "")
	a.Wait()
	<-bDone
	aData, _ := os.ReadFile(aOut.Name())
	bData, _ := os.ReadFile(bPath)
	t.Logf("run A: %s", aData)
	t.Logf("run B: %s", bData)
	if code := b.ProcessState.ExitCode(); code != 125 || !strings.Contains(string(bData), "is inside") && !strings.Contains(string(bData), "locking the workspace") {
		t.Errorf("run B, inside run A's workspace (which A's sandbox made 0311): want refused, exit 125, saying it is inside A's or that it cannot hold the directories above it; got exit %d", code)
	}
	if data, _ := os.ReadFile(filepath.Join(inner, ".envrc")); strings.Contains(string(data), "pwned") {
		t.Errorf("run B's sandbox wrote x/y/.envrc, which its contract denies, on the host (%q) once run A's sandbox had removed its placeholder", data)
	}
}

// TestSharedWorkspaceThroughOverlayUpper: one workspace tree seen at two paths whose
// directories are different inodes: an overlay's upper directory and the overlay
// (a container's root file system beside its upper layer, fuse-overlayfs). A flock
// holds an inode, so run A in the upper directory and run C in the overlay each take
// their workspace exclusively, side by side. Renaming, through the overlay, what only
// the upper layer holds renames it in the upper directory: A denies the missing
// a/b/secret, so it makes and pins a and a/b; C's sandbox renames a (A's mounts go
// with it) and A's sandbox creates a/b/secret, which its contract denies, on the
// host. C must be refused while A runs.
func TestSharedWorkspaceThroughOverlayUpper(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	base := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "tmpfs", base).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", base).Run() })
	lower, upper, work, merged := filepath.Join(base, "lower"), filepath.Join(base, "upper"), filepath.Join(base, "work"), filepath.Join(base, "merged")
	for _, d := range []string{lower, filepath.Join(upper, "ws"), work, merged} {
		mustMkdir(t, d)
	}
	if out, err := exec.Command("mount", "-t", "overlay", "overlay", "-o", "lowerdir="+lower+",upperdir="+upper+",workdir="+work, merged).CombinedOutput(); err != nil {
		t.Fatalf("mount overlay: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", merged).Run() })
	aWS, cWS := filepath.Join(upper, "ws"), filepath.Join(merged, "ws")
	// As nobody: root's cordon idmaps the workspace, which an overlay may not support.
	asNobody := nobodysWorld(w)
	for _, d := range []string{base, upper, aWS, merged} {
		os.Chmod(d, 0o755)
	}
	os.Chown(aWS, 65534, 65534)
	for d := filepath.Dir(base); d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	dir := t.TempDir()
	aContract, cContract := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "c.yaml")
	mustWrite(t, aContract, "version: 1\nworkspace: "+aWS+"\nfilesystem:\n  deny_read: [a/b/secret]\n")
	mustWrite(t, cContract, "version: 1\nworkspace: "+cWS+"\n")

	out := filepath.Join(t.TempDir(), "a.out")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a := exec.Command(testutil.Cordon(t), "run", "-c", aContract, "--", "sh", "-c",
		"touch a-ready; while [ ! -e go-a ]; do sleep 0.05; done; "+writeSecret)
	a.Dir, a.Stdout, a.Stderr = aWS, f, f
	asNobody(a)
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if a.ProcessState == nil {
			a.Process.Kill()
			a.Wait()
		}
	}()
	waitFor(t, time.Minute, "run A's command", func() bool { return exists(filepath.Join(aWS, "a-ready")) })

	c := exec.Command(testutil.Cordon(t), "run", "-c", cContract, "--", "sh", "-c",
		"mv a a2 && echo moved")
	c.Dir = cWS
	asNobody(c)
	r := runResult(t, c, "cordon")
	t.Logf("run C: %v", r)
	refusedInUse(t, "run C, in run A's workspace through the overlay", r)

	mustWrite(t, filepath.Join(aWS, "go-a"), "")
	a.Wait()
	aOut, _ := os.ReadFile(out)
	t.Logf("run A: %s", aOut)
	if data, _ := os.ReadFile(filepath.Join(aWS, "a", "b", "secret")); strings.Contains(string(data), "pwned") || strings.Contains(string(aOut), "write=0") {
		t.Errorf("run A's sandbox wrote a/b/secret, which its contract denies, on the host (%q) once run C's sandbox had renamed a", data)
	}
}
