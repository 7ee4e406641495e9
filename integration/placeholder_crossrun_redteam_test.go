package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/internal/testutil"
)

// Red team: two runs in one workspace, each with its own contract. A pins the
// directories above a denied path (bound onto themselves) and masks the path itself,
// but a mount point is one only in A's mount namespace: in the sandbox of a run C
// whose contract does not deny that path, the same directories and placeholder are
// ordinary entries it may rename or unlink (Linux 3.18+ lets another namespace do so:
// a rename carries A's mounts along with the dentry, an unlink detaches them). Each
// test has C try one such thing and then A try to write the path its own contract
// denies. A workspace tree is now one live run's at a time (lockWorkspace): C is
// refused before its sandbox exists, and A's denial holds.

// crossRun is one attack's workspace and the contracts of its runs A (the victim of
// the attack, whose denial is at stake) and C (the other run), both outside it.
type crossRun struct {
	w                    *world
	aContract, cContract string
}

func newCrossRun(t *testing.T, aFilesystem, cFilesystem string) *crossRun {
	w := newWorld(t)
	dir := t.TempDir()
	cr := &crossRun{w: w, aContract: filepath.Join(dir, "a.yaml"), cContract: filepath.Join(dir, "c.yaml")}
	mustWrite(t, cr.aContract, "version: 1\nworkspace: "+w.ws+"\n"+aFilesystem)
	mustWrite(t, cr.cContract, "version: 1\nworkspace: "+w.ws+"\n"+cFilesystem)
	return cr
}

// startA starts run A, whose command signals it runs (a-ready), then waits for go-a
// before it runs script. wait ends it (it must have been told to go) and returns its
// output.
func (cr *crossRun) startA(script string, extra ...string) (cmd *exec.Cmd, wait func() string) {
	return cr.start(cr.aContract, "a", script, extra...)
}

// start starts a run with contract whose command touches NAME-ready, then waits for
// go-NAME before it runs script; wait tells it to go, waits for its end and returns
// its output.
func (cr *crossRun) start(contract, name, script string, extra ...string) (cmd *exec.Cmd, wait func() string) {
	t, w := cr.w.t, cr.w
	t.Helper()
	out := filepath.Join(t.TempDir(), name+".out")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	args := append(append([]string{"run", "-c", contract}, extra...), "--", "sh", "-c",
		"touch "+name+"-ready; while [ ! -e go-"+name+" ]; do sleep 0.05; done; "+script)
	cmd = exec.Command(testutil.Cordon(t), args...)
	cmd.Dir, cmd.Env = w.ws, w.env
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
		f.Close()
	})
	waitFor(t, time.Minute, "run "+name+"'s command", func() bool { return exists(filepath.Join(w.ws, name+"-ready")) })
	return cmd, func() string {
		mustWrite(t, filepath.Join(w.ws, "go-"+name), "")
		cmd.Wait()
		data, _ := os.ReadFile(out)
		return string(data)
	}
}

// c runs C's script to its end in the workspace, with C's contract.
func (cr *crossRun) c(script string, extra ...string) result {
	args := append([]string{"run", "-c", cr.cContract}, extra...)
	r := cr.w.cordon("", append(args, "--", "sh", "-c", script)...)
	cr.w.t.Logf("run C: %v", r)
	return r
}

// cBeside is c while another run is live in the workspace tree: it must be refused,
// exit 125, saying the workspace is in use (lockWorkspace), its script never run.
func (cr *crossRun) cBeside(script string, extra ...string) result {
	cr.w.t.Helper()
	r := cr.c(script, extra...)
	refusedInUse(cr.w.t, "run C", r)
	return r
}

// refusedInUse fails unless r is a run refused because its workspace tree is another
// live run's: exit 125, saying so.
func refusedInUse(t *testing.T, what string, r result) {
	t.Helper()
	if r.code != 125 || !strings.Contains(r.stderr, "is in use") && !strings.Contains(r.stderr, "is inside") {
		t.Errorf("%s beside a live run in its workspace tree: want refused, exit 125, saying the workspace is in use; got %v", what, r)
	}
}

// assertNotWritten fails when A's sandbox wrote rel (its output says write=0, or the
// host file holds what it wrote).
func (cr *crossRun) assertNotWritten(rel, aOut string) {
	t := cr.w.t
	t.Helper()
	data, _ := os.ReadFile(filepath.Join(cr.w.ws, rel))
	if strings.Contains(string(data), "pwned") || strings.Contains(aOut, "write=0") {
		t.Errorf("run A's sandbox wrote %s, which its contract denies, on the host (%q) once run C had acted:\n%s", rel, data, aOut)
	}
}

const writeSecret = "mkdir -p a/b 2>/dev/null; echo pwned > a/b/secret; echo write=$?"

// TestOtherRunRenamesPinnedParent: A denies the missing a/b/secret, so it makes a
// and a/b for it and pins them. C (the default contract: the workspace writable)
// renames a; A's mounts go with it, and A makes a/b/secret afresh.
func TestOtherRunRenamesPinnedParent(t *testing.T) {
	cr := newCrossRun(t, "filesystem:\n  deny_read: [a/b/secret]\n", "")
	_, wait := cr.startA(writeSecret)
	if r := cr.cBeside("mv a a.moved && echo moved"); !strings.Contains(r.stdout, "moved") {
		t.Logf("C could not rename a: %v", r)
	}
	cr.assertNotWritten("a/b/secret", wait())
}

// TestOtherRunRenamesPinnedParentInsideItsGrant: as TestOtherRunRenamesPinnedParent,
// with C granted only a (which is then C's own mount point and cannot be renamed):
// C renames a/b, A's pinned parent below it.
func TestOtherRunRenamesPinnedParentInsideItsGrant(t *testing.T) {
	cr := newCrossRun(t, "filesystem:\n  deny_read: [a/b/secret]\n", "")
	mustMkdir(t, filepath.Join(cr.w.ws, "a"))
	mustWrite(t, cr.cContract, "version: 1\nworkspace: "+cr.w.ws+"\nfilesystem:\n  writable: [a]\n")
	_, wait := cr.startA(writeSecret)
	if r := cr.cBeside("mv a/b a/b.moved && echo moved"); !strings.Contains(r.stdout, "moved") {
		t.Logf("C could not rename a/b: %v", r)
	}
	cr.assertNotWritten("a/b/secret", wait())
}

// TestOtherRunUnlinksPlaceholder: C removes A's placeholder a/b/secret; the unlink
// detaches A's mask over it in A's sandbox.
func TestOtherRunUnlinksPlaceholder(t *testing.T) {
	cr := newCrossRun(t, "filesystem:\n  deny_read: [a/b/secret]\n", "")
	_, wait := cr.startA(writeSecret)
	if r := cr.cBeside("rm a/b/secret && echo removed"); !strings.Contains(r.stdout, "removed") {
		t.Logf("C could not remove the placeholder: %v", r)
	}
	cr.assertNotWritten("a/b/secret", wait())
}

// TestOtherRunUnlinksEnvrcPlaceholder: A runs the default contract, which keeps
// .envrc (direnv runs it on the host) from being created; C's contract widens .envrc
// for writing, so it adopts nothing and masks nothing there, and removes A's
// placeholder. A's sandbox must still not be able to create .envrc.
func TestOtherRunUnlinksEnvrcPlaceholder(t *testing.T) {
	cr := newCrossRun(t, "", "filesystem:\n  widen:\n    - path: .envrc\n      access: write\n      why: the task writes the env file\n")
	_, wait := cr.startA("echo 'echo pwned' > .envrc; echo write=$?")
	if r := cr.cBeside("rm -rf .envrc && [ ! -e .envrc ] && echo removed"); !strings.Contains(r.stdout, "removed") {
		t.Logf("C could not remove the placeholder: %v", r)
	}
	cr.assertNotWritten(".envrc", wait())
}

// TestOtherRunStagedApplyUnlinksPlaceholder: C is a staged run that removes a, which
// holds A's pinned parents and placeholder; it runs before A (beside A it is refused)
// and `cordon apply` would land the removal on the host while A runs. The apply is
// refused while A lives, and A's sandbox cannot create a/b/secret.
func TestOtherRunStagedApplyUnlinksPlaceholder(t *testing.T) {
	cr := newCrossRun(t, "filesystem:\n  deny_read: [a/b/secret]\n", "")
	mustMkdir(t, filepath.Join(cr.w.ws, "a", "b"))
	r := cr.c("rm -rf a && echo removed", "--stage")
	m := stagedRunID.FindStringSubmatch(r.stderr)
	if r.code != 0 || m == nil {
		t.Fatalf("staged run C: %v", r)
	}
	_, wait := cr.startA(writeSecret)
	refusedInUse(t, "a staged run", cr.c("true", "--stage"))
	if ar := cr.w.cordon("", "apply", m[1]); ar.code == 0 || !strings.Contains(ar.stderr, "is in use") {
		t.Errorf("cordon apply while run A lives in the workspace: want refused, saying the workspace is in use; got %v", ar)
	}
	cr.assertNotWritten("a/b/secret", wait())
}

// TestOtherRunRenamedParentLeavesNothing: C renames A's pinned parent a; A ends
// without writing anything. What cordon made for A (the placeholder and its parents,
// wherever C moved them) must not be left in the workspace, after A's teardown and
// `cordon gc`.
func TestOtherRunRenamedParentLeavesNothing(t *testing.T) {
	cr := newCrossRun(t, "filesystem:\n  deny_read: [a/b/secret]\n", "")
	_, wait := cr.startA("true")
	cr.c("mv a a.moved && echo moved")
	t.Logf("run A: %s", wait())
	if r := cr.w.cordon("", "gc"); r.code != 0 {
		t.Fatalf("gc: %v", r)
	}
	if exists(filepath.Join(cr.w.ws, "a.moved", "b", "secret")) {
		t.Errorf("A's placeholder a/b/secret (and its parents), moved to a.moved by run C, is left in the workspace for good")
	}
}

// TestOtherRunSwapsParentForLink: C moves A's pinned parent a away and plants a
// link to a host directory that holds a user's empty b/ and b/secret. A's teardown,
// and gc after A is killed, remove by name: they must follow no link.
func TestOtherRunSwapsParentForLink(t *testing.T) {
	for _, kill := range []bool{false, true} {
		name := "teardown"
		if kill {
			name = "gc"
		}
		t.Run(name, func(t *testing.T) {
			cr := newCrossRun(t, "filesystem:\n  deny_read: [a/b/secret]\n", "")
			victim := t.TempDir()
			mustWrite(t, filepath.Join(victim, "b", "secret"), "")
			a, wait := cr.startA("true")
			cr.c("mv a a.moved && ln -s " + victim + " a && echo swapped")
			if kill {
				a.Process.Signal(syscall.SIGKILL)
				a.Wait()
				if r := cr.w.cordon("", "gc"); r.code != 0 {
					t.Logf("gc: %v", r)
				}
			} else {
				t.Logf("run A: %s", wait())
			}
			for _, p := range []string{filepath.Join(victim, "b", "secret"), filepath.Join(victim, "b")} {
				if !exists(p) {
					t.Errorf("%s removed %s, outside the workspace, through the link a", name, p)
				}
			}
		})
	}
}

// TestOtherRunUnlinksSessionPlaceholder: as TestOtherRunUnlinksPlaceholder, with A a
// session (`cordon session start`, then `cordon exec`) and C a one-shot run between
// two of its commands.
func TestOtherRunUnlinksSessionPlaceholder(t *testing.T) {
	cr := newCrossRun(t, "filesystem:\n  deny_read: [a/b/secret]\n", "")
	r := cr.w.cordon("", "session", "start", "-c", cr.aContract)
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || id == "" {
		t.Fatalf("session start: %v", r)
	}
	t.Cleanup(func() { cr.w.cordon("", "session", "stop", id) })
	if r := cr.w.cordon("", "exec", id, "--", "sh", "-c", "echo x > a/b/secret; echo write=$?"); !strings.Contains(r.stdout, "write=1") && !strings.Contains(r.stdout, "write=2") {
		t.Fatalf("the session could write a/b/secret before C acted: %v", r)
	}
	if r := cr.cBeside("rm a/b/secret && echo removed"); !strings.Contains(r.stdout, "removed") {
		t.Logf("C could not remove the placeholder: %v", r)
	}
	r = cr.w.cordon("", "exec", id, "--", "sh", "-c", writeSecret)
	cr.assertNotWritten("a/b/secret", r.stdout)
}

// TestAdoptedPlaceholderHoldingOthersLeavesNothing: C denies the directory a/, missing,
// and makes a placeholder directory for it; C's cordon is killed (its record stays for
// gc); A, started next, denies a/b/secret: it adopts C's a and makes a/b and
// a/b/secret inside it. Once A has ended and gc has run, nothing either made may be
// left in the workspace: A's teardown must remove what it made inside a before the a
// it adopted, or leave a to gc.
func TestAdoptedPlaceholderHoldingOthersLeavesNothing(t *testing.T) {
	cr := newCrossRun(t, "filesystem:\n  deny_read: [a/b/secret]\n", "filesystem:\n  deny_read: [a/]\n")
	c, _ := cr.start(cr.cContract, "c", "true")
	refusedInUse(t, "run A", cr.w.cordon("", "run", "-c", cr.aContract, "--", "true"))
	c.Process.Signal(syscall.SIGKILL)
	c.Wait()
	_, waitA := cr.startA("true")
	t.Logf("run A: %s", waitA())
	if r := cr.w.cordon("", "gc"); r.code != 0 {
		t.Logf("gc: %v", r)
	}
	if exists(filepath.Join(cr.w.ws, "a")) {
		t.Errorf("the placeholder directory a (C's, adopted by A, which made a/b/secret in it) is left in the workspace")
	}
}

// TestOtherRunsFilePlaceholderRefusesNestedDeny: C denies a, missing, and makes an
// empty file for it; A, started while C runs, denies a/b/secret. A is refused (its
// contract names a path below a file, or the workspace is in use), and C's mask is
// untouched.
func TestOtherRunsFilePlaceholderRefusesNestedDeny(t *testing.T) {
	cr := newCrossRun(t, "filesystem:\n  deny_read: [a/b/secret]\n", "filesystem:\n  deny_read: [a]\n")
	_, waitC := cr.start(cr.cContract, "c", "echo x > a; echo write=$?")
	if r := cr.w.cordon("", "run", "-c", cr.aContract, "--", "true"); r.code != 125 {
		t.Errorf("run A while run C holds a placeholder file for a: want refused, exit 125; got %v", r)
	}
	if out := waitC(); strings.Contains(out, "write=0") {
		t.Errorf("run C wrote a, which its contract denies, once run A was refused: %s", out)
	}
}

// quarantined lists the entries of dir that a live quarantine renamed.
func quarantined(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		if strings.Contains(e.Name(), ".cordon-quarantine") {
			names = append(names, e.Name())
		}
	}
	return names
}

// TestSharedWorkspaceRunFromSubdirectory: A runs in the workspace (as root it watches
// it: live quarantine). C, the same contract, is started in the subdirectory sub of
// the same workspace, whose missing cordon.yaml would get a placeholder, a new
// cordon.yaml below A's workspace root. C is refused before it makes anything, and
// A's quarantine renames nothing (no sub/cordon.yaml.cordon-quarantine left behind,
// and A's log does not say A's command wrote a contract).
func TestSharedWorkspaceRunFromSubdirectory(t *testing.T) {
	cr := newCrossRun(t, "", "")
	sub := filepath.Join(cr.w.ws, "sub")
	mustMkdir(t, sub)
	_, waitA := cr.startA("true")
	for i := 0; i < 3; i++ {
		cmd := exec.Command(testutil.Cordon(t), "run", "-c", cr.cContract, "--", "true")
		cmd.Dir, cmd.Env = sub, cr.w.env
		refusedInUse(t, "run C, started in sub,", runResult(t, cmd, "cordon"))
	}
	aOut := waitA()
	if q := quarantined(sub); len(q) > 0 {
		t.Errorf("run A's quarantine renamed run C's placeholders, left in the workspace: %v\nrun A: %s", q, aOut)
	}
	if entries, _ := os.ReadDir(sub); len(entries) > 0 {
		t.Errorf("the refused runs left entries in sub: %v", entries)
	}
}

// TestSharedWorkspaceNestedGitDeny: A (the default contract) watches the workspace;
// C denies sub/.git, missing, so it would make a placeholder directory for it, a new
// .git below A's workspace root. C is refused each time before it makes anything, and
// A's quarantine has nothing of C's to rename.
func TestSharedWorkspaceNestedGitDeny(t *testing.T) {
	cr := newCrossRun(t, "", "filesystem:\n  deny_read: [sub/.git/]\n")
	sub := filepath.Join(cr.w.ws, "sub")
	mustMkdir(t, sub)
	_, waitA := cr.startA("true")
	for i := 0; i < 5; i++ {
		cr.cBeside("[ -e sub/.git ] || echo MISSING")
	}
	aOut := waitA()
	if q := quarantined(sub); len(q) > 0 {
		t.Errorf("run A's quarantine renamed run C's placeholders, left in the workspace: %v\nrun A: %s", q, aOut)
	}
	if exists(filepath.Join(sub, ".git")) {
		t.Errorf("a refused run left sub/.git")
	}
}

// TestSharedWorkspaceAcrossRunRoots: two runs in one workspace under different run
// roots (the default one depends on the uid and on $XDG_RUNTIME_DIR: a terminal and an
// IDE or a service started without it; or $CORDON_RUN_ROOT). The second finds the
// first's placeholder for .envrc in place, and, not seeing it listed under its own run
// root, takes it for the user's and mounts over it; the first ends and removes it,
// which detaches that mask. The second sandbox must still be unable to create .envrc
// (direnv runs it on the host).
func TestSharedWorkspaceAcrossRunRoots(t *testing.T) {
	cr := newCrossRun(t, "", "")
	got := cr.otherRunRoot("echo 'echo pwned' > .envrc; echo write=$?")
	if data, _ := os.ReadFile(filepath.Join(cr.w.ws, ".envrc")); strings.Contains(string(data), "pwned") || strings.Contains(got, "write=0") {
		t.Fatalf("run C's sandbox wrote .envrc on the host once run A (another run root) removed the placeholder its mask rested on: %q\n%s", data, got)
	}
}

// TestSharedWorkspaceAcrossRunRootsGit: as TestSharedWorkspaceAcrossRunRoots, for the
// placeholder that keeps a workspace without a repository from getting one: once it
// is removed, the second sandbox makes .git with a core.fsmonitor, which the user's
// next `git status` in the workspace runs on the host.
func TestSharedWorkspaceAcrossRunRootsGit(t *testing.T) {
	cr := newCrossRun(t, "", "")
	marker := filepath.Join(t.TempDir(), "fsmonitor-ran")
	got := cr.otherRunRoot(`mkdir -p .git/objects .git/refs/heads && echo "ref: refs/heads/main" > .git/HEAD && printf '[core]\n\trepositoryformatversion = 0\n\tfsmonitor = "touch ` + marker + `; false"\n' > .git/config; echo write=$?`)
	t.Logf("run C: %s", got)
	cmd := exec.Command("git", "status")
	cmd.Dir = cr.w.ws
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"}
	out, _ := cmd.CombinedOutput()
	t.Logf("host git status: %s", out)
	if exists(marker) {
		t.Fatalf("the host's git status in the workspace ran the core.fsmonitor run C's sandbox planted in .git once run A (another run root) removed the placeholder its mask rested on")
	}
}

// otherRunRoot starts run A (run root the world's) and, once A's command runs, run C
// with the same contract under a run root of its own, which must be refused (the
// workspace is A's whatever the run root); then A ends and C runs again, alone, to
// show the workspace is free. It returns the refused C's output.
func (cr *crossRun) otherRunRoot(script string) string {
	t, w := cr.w.t, cr.w
	t.Helper()
	_, waitA := cr.startA("true")
	other := shortTempDir(t)
	env := slices.Clone(w.env)
	for i, e := range env {
		if strings.HasPrefix(e, paths.RunRootEnv+"=") {
			env[i] = paths.RunRootEnv + "=" + other
		}
	}
	c := exec.Command(testutil.Cordon(t), "run", "-c", cr.cContract, "--", "sh", "-c", script)
	c.Dir, c.Env = w.ws, env
	r := runResult(t, c, "cordon")
	refusedInUse(t, "run C under another run root", r)
	t.Logf("run A: %s", waitA())
	c = exec.Command(testutil.Cordon(t), "run", "-c", cr.cContract, "--", "true")
	c.Dir, c.Env = w.ws, env
	if r := runResult(t, c, "cordon"); r.code != 0 {
		t.Errorf("run C under another run root, once A had ended: %v", r)
	}
	return r.stdout + r.stderr
}

// assertNothingLeft runs gc, then fails when the workspace's root holds an entry other
// than the user's (named) and those the runs' commands made (a-ready, go-a).
func (cr *crossRun) assertNothingLeft(user ...string) {
	t, w := cr.w.t, cr.w
	t.Helper()
	if r := w.cordon("", "gc"); r.code != 0 {
		t.Logf("gc: %v", r)
	}
	made := map[string]bool{"a-ready": true, "go-a": true}
	for _, u := range user {
		made[strings.TrimSuffix(u, "/")] = true
	}
	entries, _ := os.ReadDir(w.ws)
	var left []string
	for _, e := range entries {
		if !made[e.Name()] {
			left = append(left, e.Name())
		}
	}
	if len(left) > 0 {
		t.Errorf("left in the workspace after both runs and gc: %v", left)
	}
}

// TestOtherRunUnlinksStagedRunsPlaceholder: as TestOtherRunUnlinksPlaceholder, with
// A a staged run (--stage): its sandbox writes to a copy-on-write view, landed by
// `cordon apply`. Once C has removed A's placeholder on the host, A's write to
// a/b/secret must fail, or at least never be landed on the host by apply. C, a direct
// run beside the staged A, is refused (lockWorkspace). (A's sandbox sees no new host
// file, so it keeps trying for a second instead of waiting to be told.)
func TestOtherRunUnlinksStagedRunsPlaceholder(t *testing.T) {
	cr := newCrossRun(t, "filesystem:\n  deny_read: [a/b/secret]\n", "")
	w := cr.w
	out := filepath.Join(t.TempDir(), "a.out")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a := exec.Command(testutil.Cordon(t), "run", "--stage", "-c", cr.aContract, "--", "sh", "-c",
		`touch a-ready; i=0; while [ $i -lt 20 ]; do if (mkdir -p a/b; echo pwned > a/b/secret) 2>/dev/null; then echo write=0; break; fi; sleep 0.05; i=$((i+1)); done`)
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
		return len(m) > 0
	})
	if r := cr.cBeside("rm a/b/secret && echo removed"); !strings.Contains(r.stdout, "removed") {
		t.Logf("C could not remove the placeholder: %v", r)
	}
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

// TestSharedWorkspaceThroughTwoPaths: one workspace directory reached at two paths (a
// bind mount on the host: a container's or a VM's shared folder, a second checkout
// path). A run through the second path while the first runs must be refused (the
// lock is on the directory, not its name); otherwise it would take the first run's
// placeholder for .envrc for the user's, and the first run's removal of it would
// detach its mask.
func TestSharedWorkspaceThroughTwoPaths(t *testing.T) {
	testutil.RequireRoot(t)
	cr := newCrossRun(t, "", "")
	w := cr.w
	alias := filepath.Join(t.TempDir(), "alias")
	mustMkdir(t, alias)
	if out, err := exec.Command("mount", "--bind", w.ws, alias).CombinedOutput(); err != nil {
		t.Fatalf("mount --bind: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", alias).Run() })
	mustWrite(t, cr.cContract, "version: 1\nworkspace: "+alias+"\n")
	_, waitA := cr.startA("true")
	c := exec.Command(testutil.Cordon(t), "run", "-c", cr.cContract, "--", "sh", "-c", "echo 'echo pwned' > .envrc; echo write=$?")
	c.Dir, c.Env = alias, w.env
	refusedInUse(t, "run C through "+alias, runResult(t, c, "cordon"))
	t.Logf("run A: %s", waitA())
	if data, _ := os.ReadFile(filepath.Join(w.ws, ".envrc")); strings.Contains(string(data), "pwned") {
		t.Fatalf("run C's sandbox (the workspace through %s) wrote .envrc on the host: %q", alias, data)
	}
}

// TestConcurrentStartsDifferentContracts: runs started at once in one workspace with
// two contracts whose missing denied paths share a parent (a/b/secret, a/c/secret).
// No sandbox may write its own denied path, a run that does not start is refused
// only because the workspace is another's (lockWorkspace), and once all have ended
// (and gc has run) nothing any of them made may be left in the workspace.
func TestConcurrentStartsDifferentContracts(t *testing.T) {
	cr := newCrossRun(t, "filesystem:\n  deny_read: [a/b/secret]\n", "filesystem:\n  deny_read: [a/c/secret]\n")
	w := cr.w
	hostGit(t, w.ws, "init", "-q")
	user := append(slices.Clone(contract.HostExecuted), "cordon.yaml", ".git")
	for _, rel := range user {
		mustMkdir(t, filepath.Join(w.ws, rel))
	}
	testutil.Cordon(t)
	const rounds, runs = 4, 4
	var mu sync.Mutex
	var bad []string
	for round := 0; round < rounds; round++ {
		var wg sync.WaitGroup
		for i := 0; i < runs; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, p := cr.aContract, "a/b/secret"
				if i%2 == 1 {
					c, p = cr.cContract, "a/c/secret"
				}
				// A different lifetime for each, so that they end in every order.
				r := w.cordon("", "run", "-c", c, "--", "sh", "-c",
					"i=0; while [ $i -lt "+strconv.Itoa(i*3)+" ]; do i=$((i+1)); sleep 0.01; done; mkdir -p "+filepath.Dir(p)+" 2>/dev/null; echo pwned > "+p+" 2>/dev/null && echo WROTE; true")
				mu.Lock()
				defer mu.Unlock()
				switch {
				case strings.Contains(r.stdout, "WROTE"):
					bad = append(bad, "wrote "+p+": "+r.String())
				case r.code == 125 && strings.Contains(r.stderr, "is in use"):
				case r.code != 0:
					bad = append(bad, "refused: "+strings.TrimSpace(r.stderr))
				}
			}()
		}
		wg.Wait()
	}
	for _, b := range bad {
		t.Error(b)
	}
	cr.assertNothingLeft(user...)
}

// TestKilledRunGCBesideOtherContract: A (deny a/b/secret) and C (deny a/c/secret)
// share the parent a. A's cordon is killed, C starts (the workspace is free: A's
// cordon is gone) and adopts the a A made, and `cordon gc` removes what A left while
// C runs: the a C pins must stay, and C's sandbox must still be unable to write
// a/c/secret; once C ends, nothing is left.
func TestKilledRunGCBesideOtherContract(t *testing.T) {
	cr := newCrossRun(t, "filesystem:\n  deny_read: [a/b/secret]\n", "filesystem:\n  deny_read: [a/c/secret]\n")
	w := cr.w
	a, _ := cr.startA("true")
	a.Process.Signal(syscall.SIGKILL)
	a.Wait()
	_, waitC := cr.start(cr.cContract, "c", "mkdir -p a/c 2>/dev/null; echo pwned > a/c/secret; echo write=$?")
	if r := w.cordon("", "gc"); r.code != 0 {
		t.Errorf("gc: %v", r)
	}
	if !exists(filepath.Join(w.ws, "a", "c", "secret")) {
		t.Errorf("gc removed a/c/secret or its parent a, which run C's mask rests on")
	}
	cOut := waitC()
	if data, _ := os.ReadFile(filepath.Join(w.ws, "a", "c", "secret")); strings.Contains(string(data), "pwned") || strings.Contains(cOut, "write=0") {
		t.Fatalf("run C's sandbox wrote a/c/secret after gc cleaned up the killed run A: %q\n%s", data, cOut)
	}
	cr.assertNothingLeft("c-ready", "go-c")
}

// TestStagedRemovalOfOtherRunsPlaceholdersLaterApplied: a staged run C that would
// remove a, which holds only run A's placeholder and its parents, is refused while A
// runs; once A has ended and the user has made a/notes.txt, nothing of C's is there
// to apply over it.
func TestStagedRemovalOfOtherRunsPlaceholdersLaterApplied(t *testing.T) {
	cr := newCrossRun(t, "filesystem:\n  deny_read: [a/b/secret]\n", "")
	w := cr.w
	_, waitA := cr.startA("true")
	cr.cBeside("rm -rf a && echo removed", "--stage")
	t.Logf("run A: %s", waitA())
	notes := filepath.Join(w.ws, "a", "notes.txt")
	mustWrite(t, notes, "the user's notes\n")
	if data, err := os.ReadFile(notes); err != nil || string(data) != "the user's notes\n" {
		t.Errorf("the user's a/notes.txt: %v %q", err, data)
	}
}
