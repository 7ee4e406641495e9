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

// Red-team attacks on the masks of protected workspace paths (.envrc and the like)
// once a host tool removed the entry a mask rested on: the live watch and the
// end-of-command check that rename aside what the sandbox put there.

// maskRace runs `sh -c script` under cordon in w's workspace; once the script has
// made ./ready, onHost runs (ended is closed once the run has ended), then ./go is
// made for the script to go on. It returns the run's cordon and output.
func maskRace(t *testing.T, w *world, script string, onHost func(ended <-chan struct{})) (*exec.Cmd, string) {
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
	onHost(ended)
	mustWrite(t, filepath.Join(w.ws, "go"), "")
	<-ended
	return cmd, out.String()
}

// endsOrStands waits until the run has ended (ended closed), which a live stop makes
// happen within milliseconds of the sandbox's write, and reports whether the file at
// path held "pwned" while the run still went on a generous while after it.
func endsOrStands(ended <-chan struct{}, path string) bool {
	select {
	case <-ended:
		return false
	case <-time.After(30 * time.Second):
	}
	data, err := os.ReadFile(path)
	return err == nil && strings.Contains(string(data), "pwned")
}

// TestRTMaskQuarantineNamesTaken: the rename aside of what stands at a mask's path
// tries PATH.cordon-quarantine, then -2 ... -9, never over an existing name
// (RENAME_NOREPLACE), and then random names. Those numbered names are ordinary
// workspace paths the sandbox may write: it makes them first (and -10 ... -100, which
// an earlier cordon tried). Then the host
// removes the .envrc placeholder (git clean -fdx), the sandbox writes its own .envrc,
// and neither the live watch nor the command's end can rename it aside: it is left
// on the host for direnv to run. Shows the quarantine name is the sandbox's to choose.
func TestRTMaskQuarantineNamesTaken(t *testing.T) {
	w := newWorld(t)
	hostGit(t, w.ws, "init", "-q")
	envrc := filepath.Join(w.ws, ".envrc")
	script := `touch .envrc.cordon-quarantine; i=2; while [ $i -le 100 ]; do touch .envrc.cordon-quarantine-$i; i=$((i+1)); done
touch ready; while [ ! -e go ]; do sleep 0.05; done; echo 'echo pwned' > .envrc; echo write=$?`
	_, got := maskRace(t, w, script, func(<-chan struct{}) {
		if err := os.Remove(envrc); err != nil {
			t.Fatalf("removing the placeholder on the host: %v", err)
		}
	})
	t.Logf("the run:\n%s", got)
	if data, err := os.ReadFile(envrc); err == nil && strings.Contains(string(data), "pwned") {
		t.Fatalf("the sandbox's .envrc is on the host after the run (every quarantine name taken): %q", data)
	}
}

// mountNoBirth mounts over dir a fresh ext4 file system whose 128-byte inodes keep no
// birth time, where a file removed frees its inode number for the next file made.
func mountNoBirth(t *testing.T, dir string) {
	t.Helper()
	img := filepath.Join(t.TempDir(), "nobirth.img")
	for _, c := range [][]string{
		{"truncate", "-s", "64M", img},
		{"mkfs.ext4", "-q", "-F", "-I", "128", img},
		{"mount", "-o", "loop", img, dir},
	} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", c, err, out)
		}
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
}

// TestRTMaskInodeReusedWithoutBirth (held): the workspace is on a file system without
// birth times (ext4 with 128-byte inodes), where sameEntry compares device and inode
// only. The user's .envrc, masked read-only, is removed on the host during the run
// (git clean -fdx); the sandbox reads its inode number through the mask beforehand and,
// once it is gone, makes files until one takes that number, to move it into place: the
// live watch and the command's end would take it for the user's. It held on 6.18:
// the removed inode stays referenced for the rest of the run (300 files made, none
// took its number), so no file of the sandbox can have it; the end says the mask went.
func TestRTMaskInodeReusedWithoutBirth(t *testing.T) {
	w := newWorld(t)
	mountNoBirth(t, w.ws)
	hostGit(t, w.ws, "init", "-q")
	envrc := filepath.Join(w.ws, ".envrc")
	mustWrite(t, envrc, "echo the user's\n")
	var before os.FileInfo
	// The sandbox reads the inode number of the user's .envrc through its mask, and
	// once it is gone makes files in a scratch directory until one takes that number
	// (the inode is freed once the detached mask lets it go), then moves it into place.
	script := `want=$(stat -c %i .envrc); mkdir scratch; touch ready; while [ -e .envrc ]; do :; done
i=0; while [ $i -lt 300 ]; do
  echo 'echo pwned' > scratch/f$i; if [ "$(stat -c %i scratch/f$i)" = "$want" ]; then mv scratch/f$i .envrc; echo moved=$?; break; fi
  i=$((i+1)); sleep 0.01
done; echo tries=$i; touch tried; while [ ! -e go ]; do sleep 0.05; done`
	_, got := maskRace(t, w, script, func(ended <-chan struct{}) {
		before, _ = os.Lstat(envrc)
		t.Logf("the user's .envrc: inode %d", before.Sys().(*syscall.Stat_t).Ino)
		if err := os.Remove(envrc); err != nil {
			t.Fatalf("removing .envrc on the host: %v", err)
		}
		waitFor(t, time.Minute, "the sandbox's tries", func() bool {
			select {
			case <-ended:
				return true
			default:
			}
			return exists(envrc) || exists(filepath.Join(w.ws, "tried"))
		})
	})
	t.Logf("the run:\n%s", got)
	if q, err := os.Lstat(envrc + ".cordon-quarantine"); err == nil {
		t.Logf("renamed aside: inode %d", q.Sys().(*syscall.Stat_t).Ino)
	}
	if after, err := os.Lstat(envrc); err == nil && before != nil && os.SameFile(before, after) {
		t.Logf("the sandbox's .envrc took the user's inode number")
	}
	if data, err := os.ReadFile(envrc); err == nil && strings.Contains(string(data), "pwned") {
		t.Fatalf("the sandbox's .envrc is on the host after the run, taken for the user's: %q", data)
	}
}

// floodPy floods the file system's fanotify queue: files named HEAD (a name the live
// watch resolves to a path and checks, the slowest events for it to handle) made,
// closed and removed in many directories, from two processes, for argv[1] seconds.
const floodPy = `import os, sys, time
from multiprocessing import Process
def flood(k, secs):
    end = time.time() + secs
    dirs = ["flood/%d-%d" % (k, i) for i in range(500)]
    for d in dirs: os.makedirs(d, exist_ok=True)
    while time.time() < end:
        for d in dirs:
            p = d + "/HEAD"
            os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o644))
            os.unlink(p)
ps = [Process(target=flood, args=(k, float(sys.argv[1]))) for k in range(2)]
for p in ps: p.start()
time.sleep(float(sys.argv[1]) / 2)
with open(".envrc", "w") as f: f.write("echo pwned\n")
open("written", "w").close()
for p in ps: p.join()
`

// TestRTMaskLiveWatchFlooded: the host removes the .envrc placeholder (git clean -fdx);
// the sandbox then floods the fanotify queue (16384 events) with events the watch
// must resolve, and writes .envrc in the middle of the flood. The queue overflows and
// the event of .envrc is lost: the watch only logs that it lost events, and the run
// goes on with the sandbox's .envrc on the host, for direnv to run, until the command
// ends. Shows the sandbox can turn the live stop off at will; the end-of-command
// check remains.
func TestRTMaskLiveWatchFlooded(t *testing.T) {
	w := newWorld(t)
	hostGit(t, w.ws, "init", "-q")
	envrc := filepath.Join(w.ws, ".envrc")
	mustWrite(t, filepath.Join(w.ws, "flood.py"), floodPy)
	script := `touch ready; while [ ! -e removed ]; do sleep 0.05; done; python3 flood.py 3; echo flood=$?; while [ ! -e go ]; do sleep 0.05; done`
	var standing bool
	cmd, got := maskRace(t, w, script, func(ended <-chan struct{}) {
		if err := os.Remove(envrc); err != nil {
			t.Fatalf("removing the placeholder on the host: %v", err)
		}
		mustWrite(t, filepath.Join(w.ws, "removed"), "")
		standing = endsOrStands(ended, envrc)
	})
	t.Logf("the run (exit %d):\n%s", cmd.ProcessState.ExitCode(), got)
	if standing {
		t.Fatalf("the sandbox's .envrc stood on the host while the run went on, seconds after it was written: the live watch missed it")
	}
}

// TestRTMaskParentMovedIntoPlace: a contract protects tools/hook.sh (deny_write), a
// file of the workspace's own. A host tool removes the untracked tools/ during the run
// (git clean -fdx), and the mask on tools/hook.sh with it. The sandbox makes x/hook.sh
// and renames x to tools: the only event is a directory moved in under the name
// "tools", not a mask's path, so the live watch lets it be, and the run goes on with
// the sandbox's tools/hook.sh on the host until the command ends. Shows the live watch
// checks the entry named by the event and not the masks below it.
func TestRTMaskParentMovedIntoPlace(t *testing.T) {
	w := newWorld(t)
	hostGit(t, w.ws, "init", "-q")
	w.contract("version: 1\nfilesystem:\n  deny_write: [tools/hook.sh]\n")
	hook := filepath.Join(w.ws, "tools", "hook.sh")
	mustWrite(t, hook, "echo the user's\n")
	script := `touch ready; while [ ! -e removed ]; do sleep 0.05; done
mkdir x && echo 'echo pwned' > x/hook.sh && mv x tools; echo moved=$?; touch written; while [ ! -e go ]; do sleep 0.05; done`
	var standing bool
	cmd, got := maskRace(t, w, script, func(ended <-chan struct{}) {
		if err := os.RemoveAll(filepath.Join(w.ws, "tools")); err != nil {
			t.Fatalf("removing tools/ on the host: %v", err)
		}
		mustWrite(t, filepath.Join(w.ws, "removed"), "")
		standing = endsOrStands(ended, hook)
	})
	t.Logf("the run (exit %d):\n%s", cmd.ProcessState.ExitCode(), got)
	if standing {
		t.Errorf("the sandbox's tools/hook.sh stood on the host while the run went on: the live watch missed a parent moved into place")
	}
	if data, err := os.ReadFile(hook); err == nil && strings.Contains(string(data), "pwned") {
		t.Errorf("the sandbox's tools/hook.sh is on the host after the run")
	}
}

// TestRTMaskSessionSecondCommand: in a session, the host removes the .envrc
// placeholder (git clean -fdx) before a first command, which ends having done
// nothing (its end says the mask went). A second command writes .envrc: the live
// watch must still stop the session at once, no later command may run, and
// `session stop` must still remove the session's placeholders.
func TestRTMaskSessionSecondCommand(t *testing.T) {
	w := newWorld(t)
	hostGit(t, w.ws, "init", "-q")
	envrc := filepath.Join(w.ws, ".envrc")
	id := w.startSession()
	if err := os.Remove(envrc); err != nil {
		t.Fatalf("removing the placeholder on the host: %v", err)
	}
	r1 := w.cordon("", "exec", id, "--", "true")
	t.Logf("first command: %v", r1)
	cmd := exec.Command(testutil.Cordon(t), "exec", id, "--", "sh", "-c",
		"echo 'echo pwned' > .envrc; echo write=$?; touch written; while [ ! -e go ]; do sleep 0.05; done")
	cmd.Dir, cmd.Env = w.ws, w.env
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	go func() { _ = cmd.Wait(); close(ended) }()
	defer func() { cmd.Process.Kill(); <-ended }()
	standing := endsOrStands(ended, envrc)
	mustWrite(t, filepath.Join(w.ws, "go"), "")
	select {
	case <-ended:
	case <-time.After(time.Minute):
		t.Fatalf("the second command did not end")
	}
	t.Logf("second command (exit %d): %s", cmd.ProcessState.ExitCode(), out.String())
	if standing {
		t.Errorf("the second command's .envrc stood on the host while it ran: the live watch missed it in a session")
	}
	if r := w.cordon("", "exec", id, "--", "sh", "-c", "echo ran"); strings.Contains(r.stdout, "ran") {
		t.Errorf("a command ran in the session after its mask went: %v", r)
	}
	if r := w.cordon("", "session", "stop", id); r.code != 0 {
		t.Logf("session stop: %v", r)
	}
	// The stop still cleans up: no placeholder of the session is left.
	for _, n := range []string{".vscode", ".claude", ".mcp.json", ".gitmodules"} {
		if exists(filepath.Join(w.ws, n)) {
			t.Errorf("the placeholder %s is left in the workspace after session stop", n)
		}
	}
	if data, err := os.ReadFile(envrc); err == nil && strings.Contains(string(data), "pwned") {
		t.Errorf("the sandbox's .envrc is on the host after the session: %q", data)
	}
}

// TestRTMaskParentSymlinked: a contract protects tools/hook.sh (deny_write), a file
// of the workspace's own. A host tool removes the untracked tools/ during the run (git
// clean -fdx), and the mask with it. The sandbox makes real/hook.sh and a symbolic
// link tools -> real. No event names a mask (the link is made under "tools"), and at
// the command's end the check of tools/hook.sh, which follows no link, fails on the
// link, as does the rename aside: the run only warns, and tools/hook.sh, read by a
// host tool, is the sandbox's. Shows a mask's parent made a link defeats both checks.
func TestRTMaskParentSymlinked(t *testing.T) {
	w := newWorld(t)
	hostGit(t, w.ws, "init", "-q")
	w.contract("version: 1\nfilesystem:\n  deny_write: [tools/hook.sh]\n")
	hook := filepath.Join(w.ws, "tools", "hook.sh")
	mustWrite(t, hook, "echo the user's\n")
	script := `touch ready; while [ ! -e go ]; do sleep 0.05; done
mkdir real && echo 'echo pwned' > real/hook.sh && ln -s real tools; echo linked=$?`
	cmd, got := maskRace(t, w, script, func(<-chan struct{}) {
		if err := os.RemoveAll(filepath.Join(w.ws, "tools")); err != nil {
			t.Fatalf("removing tools/ on the host: %v", err)
		}
	})
	t.Logf("the run (exit %d):\n%s", cmd.ProcessState.ExitCode(), got)
	if data, err := os.ReadFile(hook); err == nil && strings.Contains(string(data), "pwned") {
		t.Errorf("tools/hook.sh on the host after the run is the sandbox's, through its link tools: %q", data)
	}
}

// TestRTMaskParentSwappedBySandbox: as TestRTMaskParentSymlinked, without the host's
// help: the sandbox itself tries to move tools/ (holding the masked hook.sh) away and
// put a link tools -> real in its place. tools is pinned (mounted on itself), so the
// rename fails and the link cannot be made: held.
func TestRTMaskParentSwappedBySandbox(t *testing.T) {
	swappedBySandbox(t, "tools/hook.sh",
		"mv tools t2 2>&1; mkdir real && echo 'echo pwned' > real/hook.sh && ln -s real tools 2>&1; echo linked=$?")
}

// TestRTMaskGrandparentSwappedBySandbox: a contract protects tools/git/hook.sh, a file
// of the workspace's own. The sandbox, with no help from the host, tries to move
// tools/ (the mask's grandparent) away, which carries the mask with it, and put in its
// place a link tools -> real, real/git/hook.sh its own. Were only the mask's parent
// pinned, no event would name a mask and the end's check would fail on the link.
func TestRTMaskGrandparentSwappedBySandbox(t *testing.T) {
	swappedBySandbox(t, "tools/git/hook.sh",
		"mv tools t2 2>&1; echo moved=$?; mkdir -p real/git && echo 'echo pwned' > real/git/hook.sh && ln -s real tools 2>&1; echo linked=$?")
}

// swappedBySandbox runs script in a workspace whose contract protects its own file
// protected (deny_write), and checks the file on the host is still the user's.
func swappedBySandbox(t *testing.T, protected, script string) {
	t.Helper()
	w := newWorld(t)
	hostGit(t, w.ws, "init", "-q")
	w.contract("version: 1\nfilesystem:\n  deny_write: [" + protected + "]\n")
	hook := filepath.Join(w.ws, filepath.FromSlash(protected))
	mustWrite(t, hook, "echo the user's\n")
	r := w.sh(script)
	t.Logf("the run: %v", r)
	if data, err := os.ReadFile(hook); err != nil || strings.Contains(string(data), "pwned") {
		t.Errorf("%s on the host after the run: %q %v", protected, data, err)
	}
}

// TestRTMaskRepoQuarantineNamesTaken: the quarantine of a git repository the sandbox
// makes renames sub/.git to sub/.git.cordon-quarantine, or -2 ... -9, never over an
// existing name, or a random name. The sandbox makes a hundred numbered names first, then `git init` in sub,
// setting core.fsmonitor (a command git on the host runs in sub): neither the live
// watch nor the command's end can rename the repository aside, and it is left armed.
// Shows disarmPath's names are the sandbox's to take, for repositories as for masks.
func TestRTMaskRepoQuarantineNamesTaken(t *testing.T) {
	w := newWorld(t)
	hostGit(t, w.ws, "init", "-q")
	r := w.sh(`mkdir sub && cd sub && touch .git.cordon-quarantine && i=2 && while [ $i -le 100 ]; do touch .git.cordon-quarantine-$i; i=$((i+1)); done
git init -q && git config core.fsmonitor 'echo pwned' && echo armed`)
	t.Logf("the run: %v", r)
	if !strings.Contains(r.stdout, "armed") {
		t.Logf("the live watch renamed the repository aside under git's feet (a random quarantine name: the numbered ones were taken)")
	}
	if cfg, err := os.ReadFile(filepath.Join(w.ws, "sub", ".git", "config")); err == nil && strings.Contains(string(cfg), "pwned") {
		t.Errorf("the sandbox's repository sub/.git is left armed after the run (every quarantine name taken): %s", cfg)
	}
}
