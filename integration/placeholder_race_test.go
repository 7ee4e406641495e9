package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
)

// Attacks on the placeholders cordon makes in the host workspace for denied paths that
// do not exist, and on what a run leaves behind: the workspace is hostile.

// startRun starts `cordon run -- sh -c script` in the background; the test's cleanup
// kills it if it is still running.
func (w *world) startRun(script string) *exec.Cmd {
	w.t.Helper()
	cmd := exec.Command(testutil.Cordon(w.t), "run", "--", "sh", "-c", script)
	cmd.Dir, cmd.Env = w.ws, w.env
	var errb strings.Builder
	cmd.Stdout, cmd.Stderr = &errb, &errb
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
		if errb.Len() > 0 {
			w.t.Logf("cordon run %q: %s", script, errb.String())
		}
	})
	return cmd
}

func exists(p string) bool { _, err := os.Lstat(p); return err == nil }

// TestSharedWorkspaceSecondRunRefused: a second run in a workspace while a first runs
// there is refused before it makes anything (lockWorkspace). Were it let in, it would
// find the first's placeholder for .envrc in place and rest its mask on it, and the
// first run's removal of that placeholder at its end detaches the mask (unlinking a
// mount point on the host detaches the mounts on it in every namespace, Linux 3.18+):
// the second sandbox could then create .envrc, which direnv runs on the host.
func TestSharedWorkspaceSecondRunRefused(t *testing.T) {
	w := newWorld(t)
	hostGit(t, w.ws, "init", "-q")
	envrc := filepath.Join(w.ws, ".envrc")
	a := w.startRun("while [ ! -e end-a ]; do sleep 0.05; done")
	waitFor(t, time.Minute, "the first run's placeholder for .envrc", func() bool { return exists(envrc) })
	refusedInUse(t, "a second run", w.sh("echo 'echo pwned' > .envrc; echo write=$?"))
	refusedInUse(t, "a second session", w.cordon("", "session", "start"))
	mustWrite(t, filepath.Join(w.ws, "end-a"), "")
	if err := a.Wait(); err != nil {
		t.Fatalf("the first run: %v", err)
	}
	if r := w.sh("true"); r.code != 0 {
		t.Errorf("a run once the first had ended: %v", r)
	}
	if data, err := os.ReadFile(envrc); err == nil && len(data) > 0 {
		t.Fatalf(".envrc was written on the host: %q", data)
	}
}

// TestSharedWorkspaceMaskOutlivesGC: a first run's cordon is killed, leaving its
// placeholders; a second run in the workspace (free again) finds them in place and
// rests its masks on them; `cordon gc` then removes what the killed run left, but not
// the placeholders the live second run's masks rest on: its sandbox must still be
// unable to create .envrc.
func TestSharedWorkspaceMaskOutlivesGC(t *testing.T) {
	w := newWorld(t)
	hostGit(t, w.ws, "init", "-q")
	envrc := filepath.Join(w.ws, ".envrc")
	a := w.startRun("while [ ! -e end-a ]; do sleep 0.05; done")
	// Killed once it has recorded the placeholders it made, so that its .envrc is
	// there, the placeholder gc removes (TestKilledMakingPlaceholdersLeavesNothingAfterGC:
	// killed before, it leaves nothing at all).
	id := onlyRun(t, w)
	waitFor(t, time.Minute, "the first run's record of its placeholders", func() bool {
		return exists(envrc) && exists(filepath.Join(w.runRoot, id, "made.json"))
	})
	a.Process.Signal(syscall.SIGKILL)
	a.Wait()
	out := filepath.Join(t.TempDir(), "b.out")
	b := exec.Command(testutil.Cordon(t), "run", "--", "sh", "-c",
		"touch b-ready; while [ ! -e gc-done ]; do sleep 0.05; done; echo 'echo pwned' > .envrc; echo write=$?")
	b.Dir, b.Env = w.ws, w.env
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b.Stdout, b.Stderr = f, f
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	var waitErr error
	go func() { waitErr = b.Wait(); close(ended) }()
	defer func() {
		b.Process.Kill()
		<-ended
	}()
	// The second run may end before its command starts (refused, say): that is a
	// failure with its output, not a minute's wait.
	waitFor(t, time.Minute, "the second run's command", func() bool {
		select {
		case <-ended:
			got, _ := os.ReadFile(out)
			t.Fatalf("the second run ended before its command started (%v): %s", waitErr, got)
		default:
		}
		return exists(filepath.Join(w.ws, "b-ready"))
	})
	if r := w.cordon("", "gc"); r.code != 0 {
		t.Fatalf("gc: %v", r)
	}
	mustWrite(t, filepath.Join(w.ws, "gc-done"), "")
	<-ended
	got, _ := os.ReadFile(out)
	if data, err := os.ReadFile(envrc); err == nil && len(data) > 0 {
		t.Fatalf("the second sandbox wrote .envrc on the host once gc removed the killed run's placeholder: %q\n%s", data, got)
	}
	if strings.Contains(string(got), "write=0") {
		t.Fatalf("the second sandbox could write .envrc: %s", got)
	}
}

// TestNestedDenyLeavesNoParents: a denied path whose parent directories do not exist
// gets a placeholder, and its missing parents are created for it; after the run
// nothing cordon created may be left in the workspace, parents included.
func TestNestedDenyLeavesNoParents(t *testing.T) {
	w := newWorld(t)
	w.contract("version: 1\nfilesystem:\n  deny_read: [a/b/secret]\n")
	if r := w.sh("cat a/b/secret 2>/dev/null; echo x > a/b/secret; echo write=$?"); r.code != 0 || strings.Contains(r.stdout, "write=0") {
		t.Fatalf("run: %v", r)
	}
	if exists(filepath.Join(w.ws, "a")) {
		t.Errorf("the run left %s (made for the placeholder a/b/secret) in the workspace", filepath.Join(w.ws, "a"))
	}
}

// TestPlaceholderParentSwappedForLink: while cordon makes the placeholders of a denied
// path below a directory, a racer keeps swapping that directory for a symbolic link
// to a directory outside the workspace. Nothing may ever be created outside, and no
// sandbox that starts may write a denied path (a mask missing or misplaced).
func TestPlaceholderParentSwappedForLink(t *testing.T) {
	w := newWorld(t)
	outside := t.TempDir()
	w.contract("version: 1\nfilesystem:\n  deny_read: [d/s1, d/s2, d/s3, d/e/s4]\n")
	d := filepath.Join(w.ws, "d")
	mustMkdir(t, d)
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		real := filepath.Join(w.ws, "d.real")
		for !stop.Load() {
			if os.Rename(d, real) == nil {
				_ = os.Symlink(outside, d)
				_ = os.Remove(d)
				_ = os.Rename(real, d)
			}
		}
	}()
	ran := 0
	for i := 0; i < 20; i++ {
		r := w.sh("for p in d/s1 d/s2 d/s3 d/e/s4; do echo x > $p 2>/dev/null && echo WROTE $p; done; true")
		if strings.Contains(r.stdout, "WROTE") {
			t.Errorf("run %d: the sandbox wrote a denied path: %s", i, r.stdout)
		}
		if r.code == 0 {
			ran++
		} else {
			t.Logf("run %d: %s", i, strings.TrimSpace(r.stderr))
		}
	}
	t.Logf("%d of 20 runs ran", ran)
	stop.Store(true)
	wg.Wait()
	if entries, _ := os.ReadDir(outside); len(entries) > 0 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("cordon created %v outside the workspace, through a link planted for d", names)
	}
	// Placeholders may be left in d (or in d.real, when cordon's mkdir of a missing d
	// beat the racer's rename back): removal by name refused the link, or found another
	// directory at d. Empty entries in a directory the racer moves are ones it could
	// make itself; only what lands outside counts.
}

// TestKilledInTeardownThenGC: cordon is killed (SIGKILL) at some point of its
// teardown, as the placeholders are released beside the log's seal. `cordon gc` must
// then leave no placeholder in the workspace and no run directory, and the log must
// verify (sealed by cordon, or by gc). A kill between the owner record's removal and
// the directory's leaves a directory gc takes for one being created, for ever: within
// ten rounds of each moment it happens.
func TestKilledInTeardownThenGC(t *testing.T) {
	w := newWorld(t)
	hostGit(t, w.ws, "init", "-q")
	envrc := filepath.Join(w.ws, ".envrc")
	// Each round kills cordon at one moment of its end: as soon as the command is told
	// to end, once the first placeholder is gone (release under way, the owner record
	// still there), once the run directory's mask file is gone.
	maskGone := func() bool {
		m, _ := filepath.Glob(filepath.Join(w.runRoot, "2*", "mask-file"))
		return len(m) == 0
	}
	madeRecorded := func() bool {
		m, _ := filepath.Glob(filepath.Join(w.runRoot, "2*", "made.json"))
		return len(m) > 0
	}
	moments := []struct {
		name string
		now  func() bool
	}{
		{"at once", func() bool { return true }},
		{"a placeholder gone", func() bool { return !exists(envrc) }},
		{"the mask file gone", maskGone},
	}
	rounds := 10
	if n, err := strconv.Atoi(os.Getenv("CORDON_KILL_ROUNDS")); err == nil && n > 0 {
		rounds = n // more of each moment, to look for a rarer interleaving
	}
	for i := range len(moments) * rounds {
		m := moments[i%len(moments)]
		_ = os.Remove(filepath.Join(w.ws, "end"))
		cmd := w.startRun("while [ ! -e end ]; do sleep 0.01; done")
		// Up: its placeholders made and recorded (made.json). A cordon killed while it
		// makes them, before it records what it made, leaves them in place: gc removes
		// only what a run recorded it made, never an empty file at a recorded path.
		waitFor(t, time.Minute, "the placeholders", func() bool { return exists(envrc) && !maskGone() && madeRecorded() })
		mustWrite(t, filepath.Join(w.ws, "end"), "")
		for !m.now() {
		}
		killed := cmd.Process.Signal(syscall.SIGKILL) == nil
		err := cmd.Wait()
		t.Logf("round %d (%s): signalled %v, cordon: %v", i, m.name, killed, err)
		delay := m.name
		if r := w.cordon("", "gc"); r.code != 0 {
			t.Fatalf("round %d (killed %s): gc: %v", i, m.name, r)
		}
		if r := w.cordon("", "audit", "verify", "last"); r.code != 0 || !strings.Contains(r.stdout, "intact and sealed") {
			t.Fatalf("round %d (killed %s): the log, sealed by cordon or by gc, does not verify: %v", i, m.name, r)
		}
		entries, _ := os.ReadDir(w.ws)
		var left []string
		for _, e := range entries {
			if n := e.Name(); n != ".git" && n != "end" {
				left = append(left, n)
			}
		}
		if len(left) > 0 {
			t.Fatalf("round %d (killed %s): gc left %v in the workspace", i, delay, left)
		}
		runs, _ := os.ReadDir(w.runRoot)
		for _, e := range runs {
			if e.IsDir() && strings.HasPrefix(e.Name(), "20") {
				sub, _ := os.ReadDir(filepath.Join(w.runRoot, e.Name()))
				var names []string
				for _, s := range sub {
					names = append(names, s.Name())
				}
				t.Fatalf("round %d (killed %s): gc left the run directory %s holding %v (an empty one without its owner record is taken for one being created, and left for ever)", i, m.name, e.Name(), names)
			}
		}
	}
}

// TestPlaceholderRemovalThroughSwappedParent: the sandbox moves away the directory
// that holds its placeholders (a directory holding mount points may be renamed) and
// plants in its place a link to a host directory holding empty entries of the same
// names, a user's (by the sandbox itself, or by that of a second run in the workspace
// whose contract does not pin d). Teardown removes placeholders by name: it must follow no link, and
// leave the user's empty file and directory where they are.
func TestPlaceholderRemovalThroughSwappedParent(t *testing.T) {
	w := newWorld(t)
	victim := t.TempDir()
	mustWrite(t, filepath.Join(victim, "s1"), "")
	mustMkdir(t, filepath.Join(victim, "s2"))
	w.contract("version: 1\nfilesystem:\n  deny_read: [d/s1, d/s2/]\n")
	mustMkdir(t, filepath.Join(w.ws, "d"))
	// d is pinned (mounted on itself, so the rename fails with EBUSY) today; should it
	// not be, teardown must still not follow the link.
	r := w.sh("mv d d.moved 2>&1 && ln -s " + victim + " d && echo swapped; true")
	if r.code != 0 {
		t.Fatalf("run: %v", r)
	}
	t.Logf("the sandbox: %s", strings.TrimSpace(r.stdout))
	for _, n := range []string{"s1", "s2"} {
		if !exists(filepath.Join(victim, n)) {
			t.Errorf("teardown removed %s, outside the workspace, through the link d", filepath.Join(victim, n))
		}
	}
}

// TestPlaceholderRemovalThroughParentSwappedByOtherRun: the first run denies d/s1 and
// d/s2, which do not exist (placeholders); a second run in the same workspace, whose
// contract pins nothing in d, moves d away and plants a link to a host directory
// holding a user's empty s1 and s2. The first run's teardown must follow no link.
func TestPlaceholderRemovalThroughParentSwappedByOtherRun(t *testing.T) {
	w := newWorld(t)
	victim := t.TempDir()
	mustWrite(t, filepath.Join(victim, "s1"), "")
	mustMkdir(t, filepath.Join(victim, "s2"))
	w.contract("version: 1\nfilesystem:\n  deny_read: [d/s1, d/s2/]\n")
	mustMkdir(t, filepath.Join(w.ws, "d"))
	a := w.startRun("while [ ! -e end-a ]; do sleep 0.05; done")
	waitFor(t, time.Minute, "the first run's placeholders", func() bool { return exists(filepath.Join(w.ws, "d", "s1")) })
	other := filepath.Join(t.TempDir(), "b.yaml")
	mustWrite(t, other, "version: 1\nworkspace: "+w.ws+"\n")
	r := w.cordon("", "run", "-c", other, "--", "sh", "-c", "mv d d.moved 2>&1 && ln -s "+victim+" d && echo swapped; true")
	t.Logf("the second run: %v", r)
	mustWrite(t, filepath.Join(w.ws, "end-a"), "")
	a.Wait()
	for _, n := range []string{"s1", "s2"} {
		if !exists(filepath.Join(victim, n)) {
			t.Errorf("teardown removed %s, outside the workspace, through the link d", filepath.Join(victim, n))
		}
	}
	if !strings.Contains(r.stdout, "swapped") {
		t.Logf("the second sandbox could not swap d: the attack did not get as far as teardown")
	}
}

// TestConcurrentStartsKeepMasks: runs started at once in one workspace. No sandbox may
// write .envrc, and a run that does not start is refused only because the workspace
// is another's (lockWorkspace), never because of another's placeholders.
func TestConcurrentStartsKeepMasks(t *testing.T) {
	w := newWorld(t)
	hostGit(t, w.ws, "init", "-q")
	testutil.Cordon(t) // built before the runs race
	const rounds, runs = 3, 4
	var wrote, refused []string
	for round := 0; round < rounds; round++ {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := 0; i < runs; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := w.sh("echo x > .envrc 2>/dev/null && echo WROTE; true")
				mu.Lock()
				defer mu.Unlock()
				switch {
				case strings.Contains(r.stdout, "WROTE"):
					wrote = append(wrote, r.String())
				case r.code == 125 && strings.Contains(r.stderr, "is in use"):
				case r.code != 0:
					refused = append(refused, strings.TrimSpace(r.stderr))
				}
			}()
		}
		wg.Wait()
		_ = os.Remove(filepath.Join(w.ws, ".envrc"))
	}
	if len(wrote) > 0 {
		t.Errorf("%d of %d sandboxes started at once wrote .envrc on the host:\n%s", len(wrote), rounds*runs, strings.Join(wrote, "\n"))
	}
	if len(refused) > 0 {
		t.Errorf("%d of %d runs started at once in one workspace were refused for another reason than the workspace in use:\n%s", len(refused), rounds*runs, strings.Join(refused, "\n"))
	}
}

// TestPlaceholderRemovedOnHost: while a run holds a placeholder for .envrc (the
// default contract keeps the sandbox from writing it: direnv runs it on the host), a
// host tool removes it (`git clean -fdx` removes untracked files; an editor, an `rm`).
// Unlinking a mount point detaches the mask on it in the sandbox, which can then write
// .envrc. When the command ends, what stands where the placeholder was is renamed
// aside and the run says so: nothing the sandbox wrote there is left for a host tool
// to obey.
func TestPlaceholderRemovedOnHost(t *testing.T) {
	w := newWorld(t)
	hostGit(t, w.ws, "init", "-q")
	envrc := filepath.Join(w.ws, ".envrc")
	cmd, got := envrcRace(t, w, func() {
		if err := os.Remove(envrc); err != nil {
			t.Fatalf("removing the placeholder on the host: %v", err)
		}
	})
	maskWentStopped(t, cmd, got, envrc)
}

// envrcRace runs a command that, once the host has done onHost, writes .envrc in
// w's workspace (its mask gone, it can), and returns the run's cordon and output.
func envrcRace(t *testing.T, w *world, onHost func()) (*exec.Cmd, string) {
	t.Helper()
	return maskRace(t, w, "touch ready; while [ ! -e go ]; do sleep 0.05; done; echo 'echo pwned' > .envrc; echo write=$?",
		func(<-chan struct{}) { onHost() })
}

// maskWentStopped checks a run whose sandbox wrote the masked path envrc once its
// mask went: the live watch (as root) stopped the run at the write, exit 125 saying
// why, and nothing is left at envrc; what the sandbox wrote, if it got as far, is in
// envrc.cordon-quarantine.
func maskWentStopped(t *testing.T, cmd *exec.Cmd, got, envrc string) {
	t.Helper()
	if code := cmd.ProcessState.ExitCode(); code != 125 || !strings.Contains(got, "mask on .envrc went during the run") {
		t.Errorf("the run went on once the sandbox wrote where its mask was (exit %d):\n%s", code, got)
	}
	if strings.Contains(got, "write=0") {
		t.Logf("the sandbox's write went through before it was stopped (renamed aside below)")
	}
	if data, err := os.ReadFile(envrc); err == nil {
		t.Errorf(".envrc is on the host after the run, holding %q:\n%s", data, got)
	}
	if data, err := os.ReadFile(envrc + ".cordon-quarantine"); err == nil && len(data) > 0 && !strings.Contains(string(data), "pwned") {
		t.Errorf(".envrc.cordon-quarantine holds %q, not what the sandbox wrote", data)
	} else if err != nil && !strings.Contains(got, "was removed on the host") {
		t.Errorf("nothing renamed aside, and the run did not say the mask went (%v):\n%s", err, got)
	}
}

// TestMaskedEntryRemovedOnHost: the workspace's own .envrc, which the default contract
// binds read-only, is removed on the host during the run (git clean -fdx removes an
// untracked one): its mask in the sandbox goes with it, and the sandbox writes an
// .envrc of its own, which direnv would run. At the command's end what stands there
// is not the entry the run started with: it is renamed aside and the run says so.
// The host's git, working in .git meanwhile (a commit: objects, the index, refs), is
// the user's, and leaves .git where it is.
func TestMaskedEntryRemovedOnHost(t *testing.T) {
	w := newWorld(t)
	hostGit(t, w.ws, "init", "-q")
	envrc := filepath.Join(w.ws, ".envrc")
	mustWrite(t, envrc, "echo the user's\n")
	cmd, got := envrcRace(t, w, func() {
		mustWrite(t, filepath.Join(w.ws, "tracked.txt"), "x\n")
		hostGit(t, w.ws, "add", "tracked.txt")
		hostGit(t, w.ws, "-c", "user.name=u", "-c", "user.email=u@localhost", "commit", "-q", "-m", "on the host")
		if err := os.Remove(envrc); err != nil {
			t.Fatalf("removing .envrc on the host: %v", err)
		}
	})
	t.Logf("the run:\n%s", got)
	maskWentStopped(t, cmd, got, envrc)
	if exists(filepath.Join(w.ws, ".git.cordon-quarantine")) || !exists(filepath.Join(w.ws, ".git", "HEAD")) {
		t.Errorf("the host's commit moved .git aside:\n%s", got)
	}
}

// TestMaskedEntryKept: the workspace's own protected entries, untouched during the
// run, stay where they are, and the run says nothing of them.
func TestMaskedEntryKept(t *testing.T) {
	w := newWorld(t)
	hostGit(t, w.ws, "init", "-q")
	envrc := filepath.Join(w.ws, ".envrc")
	mustWrite(t, envrc, "echo the user's\n")
	r := w.cordon("", "run", "--", "cat", ".envrc")
	if r.code != 0 || r.stdout != "echo the user's\n" {
		t.Fatalf("run: %v", r)
	}
	if strings.Contains(r.stderr, "protected entry") || exists(envrc+".cordon-quarantine") {
		t.Errorf("an untouched .envrc was taken for a replaced one: %s", r.stderr)
	}
	if data, err := os.ReadFile(envrc); err != nil || string(data) != "echo the user's\n" {
		t.Errorf(".envrc after the run: %q %v", data, err)
	}
}

// TestKilledMakingPlaceholdersLeavesNothingAfterGC: cordon is SIGKILLed as it makes
// its placeholders (at the first sight of one, made aside or placed), then `cordon gc`
// runs: the workspace must hold exactly what it held before. A placeholder made at
// its path before its identity was recorded was left for good (gc removes nothing it
// cannot prove a run made), an empty cordon.yaml directory among them.
func TestKilledMakingPlaceholdersLeavesNothingAfterGC(t *testing.T) {
	w := newWorld(t)
	before := testutil.Tree(t, w.ws)
	killed := 0
	for try := 0; try < 12; try++ {
		// Poll as fast as the machine lets us: the placeholders take a few ms.
		cmd, done := startTrue(t, w)
		untilEnd(done, func() bool {
			if len(testutil.Tree(t, w.ws)) == len(before) {
				return false
			}
			cmd.Process.Signal(syscall.SIGKILL)
			killed++
			<-done
			return true
		})
		if r := w.cordon("", "gc"); r.code != 0 {
			t.Fatalf("gc: %v", r)
		}
		if after := testutil.Tree(t, w.ws); !slices.Equal(after, before) {
			t.Fatalf("try %d: after a kill and gc the workspace holds %q, want %q", try, after, before)
		}
	}
	if killed == 0 {
		t.Fatal("no run was seen making its placeholders: nothing was tested")
	}
	t.Logf("%d of 12 runs killed while making their placeholders", killed)
}
