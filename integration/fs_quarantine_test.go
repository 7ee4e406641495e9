package integration

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/testutil"
)

// armedRepos lists the entries named .git under ws (the workspace's own aside).
func armedRepos(t *testing.T, ws string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == ".git" && p != filepath.Join(ws, ".git") {
			out = append(out, strings.TrimPrefix(p, ws+"/"))
		}
		return nil
	})
	return out
}

// TestNestedRepositoryQuarantined: a nested .git a command creates (its config's
// core.fsmonitor would run on the host's next git status there) shows in the diff and
// is renamed out of git's sight when the command ends; one that was there before stays.
func TestNestedRepositoryQuarantined(t *testing.T) {
	w := newWorld(t)
	mustWrite(t, filepath.Join(w.ws, "vendor", "dep", ".git", "HEAD"), "ref: refs/heads/main\n")
	// Prepared elsewhere and moved into place whole, so that it is complete whether it is
	// disarmed the moment it appears (as root) or when the command ends.
	r := w.sh("mkdir -p prep docs && printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' > prep/config && echo ref > prep/HEAD && mv prep docs/.git")
	if r.code != 0 {
		t.Fatal(r)
	}
	if _, err := os.Stat(filepath.Join(w.ws, "docs", ".git")); err == nil {
		t.Fatal("the nested repository is still there")
	}
	// Renamed, not removed. The repository arrives whole on the host when the
	// sandbox writes the workspace itself; a Pod's comes back entry by entry in the
	// sync after the command, and the live watch renames docs/.git the moment the
	// sync makes the directory, before or after its config: the rename is all that
	// is certain (what did not land stays in the Pod).
	kept := filepath.Join(w.ws, "docs", ".git.cordon-quarantine", "config")
	if os.Getenv("CORDON_BACKEND") == "kubernetes" {
		kept = filepath.Dir(kept)
	}
	if _, err := os.Stat(kept); err != nil {
		t.Fatalf("the quarantined repository is gone: %v", err)
	}
	if _, err := os.Stat(filepath.Join(w.ws, "vendor", "dep", ".git", "HEAD")); err != nil {
		t.Fatalf("a repository that was there before was touched: %v", err)
	}
	assertContains(t, "cordon says so", r.stderr, "renamed docs/.git to docs/.git.cordon-quarantine")
	show := w.cordon("", "audit", "show", "--diff", "last")
	assertContains(t, "the diff shows it", show.stdout, "docs/.git")
	// A bare repository anywhere (HEAD, objects/, refs/, config) is one git obeys when
	// run inside it: its HEAD is renamed, so git no longer sees a repository there.
	r = w.sh("mkdir -p site/objects site/refs && printf 'ref: refs/heads/main\\n' > site/HEAD && printf '[core]\\n\\tpager = touch /tmp/pwned\\n' > site/config")
	assertContains(t, "cordon says so", r.stderr, "renamed site/HEAD to site/HEAD.cordon-quarantine")
	if _, err := os.Stat(filepath.Join(w.ws, "site", "HEAD")); err == nil {
		t.Fatal("the bare repository is still one")
	}
	if out, err := exec.Command("git", "-C", filepath.Join(w.ws, "site"), "rev-parse", "--git-dir").CombinedOutput(); err == nil && strings.TrimSpace(string(out)) == "." {
		t.Fatalf("git still takes site for a repository: %s", out)
	}
	// Moved into place whole, prepared elsewhere: the same.
	r = w.sh("mkdir -p prep/g/objects prep/g/refs && echo 'ref: refs/heads/main' > prep/g/HEAD && mv prep/g lib.git && mkdir lib && mv lib.git lib/.git")
	assertContains(t, "cordon says so", r.stderr, "renamed lib/.git to lib/.git.cordon-quarantine")
}

// TestNewRepositoryDisarmedAtOnce: as root, cordon watches the workspace's file system
// and disarms a git repository the moment it is made, not when the command ends: a git
// the host runs there meanwhile (an editor polling) never sees it.
func TestNewRepositoryDisarmedAtOnce(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	r := w.sh("mkdir -p prep/objects prep/refs && echo 'ref: refs/heads/main' > prep/HEAD && " +
		"printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' > prep/config && mkdir docs && mv prep docs/.git; " +
		"i=0; while [ -e docs/.git ] && [ $i -lt 500 ]; do i=$((i+1)); sleep 0.01; done; " +
		"[ -e docs/.git ] && echo still-there; ls -a docs; " +
		"mkdir -p p2/objects p2/refs && echo 'ref: refs/heads/main' > p2/HEAD && mv p2 site; " +
		"mkdir -p c/objects c/refs && exec 3>c/HEAD && printf 'ref: refs/heads/main\\n' >&3 && " +
		"i=0; while [ -e c/HEAD ] && [ $i -lt 500 ]; do i=$((i+1)); sleep 0.01; done; [ -e c/HEAD ] && echo open-still-there; exec 3>&-; " +
		"i=0; while [ -e site/HEAD ] && [ $i -lt 500 ]; do i=$((i+1)); sleep 0.01; done; [ -e site/HEAD ] && echo bare-still-there; echo done")
	assertContains(t, "ran", r.stdout, "done")
	if strings.Contains(r.stdout, "still-there") {
		t.Fatalf("a new repository lived on while its command ran: %v", r)
	}
	assertContains(t, "the command saw it quarantined", r.stdout, ".git.cordon-quarantine")
	show := w.cordon("", "audit", "show", "--diff", "last")
	for _, q := range []string{"docs/.git", "site/HEAD"} {
		assertContains(t, "the log lists what was quarantined", show.stdout, q)
	}
}

// TestSessionStopSweepsAfterTheSandbox: a process the session left behind makes
// repositories until the very end; stopping the session takes its last look once
// nothing in the sandbox runs, so none is left armed or out of the log.
func TestSessionStopSweepsAfterTheSandbox(t *testing.T) {
	w := newWorld(t)
	id := w.startSession()
	r := w.cordon("", "exec", id, "--", "sh", "-c", `setsid sh -c 'i=0; while :; do i=$((i+1)); mkdir -p p$i/objects p$i/refs; echo "ref: refs/heads/m" > p$i/HEAD; mv p$i n$i.git 2>/dev/null; mkdir -p d$i && mv n$i.git d$i/.git 2>/dev/null; echo $i > tick.txt; done' >/dev/null 2>&1 </dev/null & echo started`)
	assertContains(t, "background writer", r.stdout, "started")
	// The exec has returned, its diff recorded (which may hold the writer's first
	// ticks): a tick past the one read now is written between commands.
	tick := filepath.Join(w.ws, "tick.txt")
	var first []byte
	waitFor(t, 20*time.Second, "the writer's first tick", func() bool {
		first, _ = os.ReadFile(tick)
		return len(first) > 0
	})
	waitFor(t, 20*time.Second, "the writer's next tick", func() bool {
		now, _ := os.ReadFile(tick)
		return len(now) > 0 && string(now) != string(first)
	})
	if r := w.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatalf("session stop: %v", r)
	}
	if armed := armedRepos(t, w.ws); len(armed) > 0 {
		t.Fatalf("repositories left armed after the session stopped: %v", armed)
	}
	show := w.cordon("", "audit", "show", "--diff", id)
	assertContains(t, "the writer's file is logged", show.stdout, "tick.txt  (between commands)")
}

// TestGCDisarmsWhatAKilledRunLeft: a run whose cordon was killed before its last sweep
// left a repository armed; cordon gc disarms what was made or changed since the run
// started, and leaves older ones alone.
func TestGCDisarmsWhatAKilledRunLeft(t *testing.T) {
	w := newWorld(t)
	old := filepath.Join(w.ws, "old", ".git")
	mustWrite(t, filepath.Join(old, "config"), "[core]\n")
	id := w.startSession()
	pid := sessionPID(t, w, id)
	if err := linux.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); linux.Kill(pid, 0) == nil && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
	}
	// What the sandbox made as its cordon died, before any sweep.
	mustWrite(t, filepath.Join(w.ws, "late", ".git", "config"), "[core]\n\tfsmonitor = touch /tmp/pwned\n")
	if r := w.cordon("", "gc"); r.code != 0 {
		t.Fatalf("gc: %v", r)
	}
	if armed := armedRepos(t, w.ws); len(armed) != 1 || armed[0] != "old/.git" {
		t.Fatalf("after gc: armed %v, want only old/.git", armed)
	}
	if _, err := os.Stat(filepath.Join(w.ws, "late", ".git.cordon-quarantine", "config")); err != nil {
		t.Fatalf("late/.git was not quarantined: %v", err)
	}
}

// TestContractBelowTheRootQuarantined: a cordon.yaml the sandbox writes in a
// subdirectory (with workspace: .. and the network open) would be the contract of the
// next run started there; it is renamed as it appears or when the command ends, and
// cordon says so.
func TestContractBelowTheRootQuarantined(t *testing.T) {
	w := newWorld(t)
	mustWrite(t, filepath.Join(w.ws, "lib", "cordon.yaml"), "version: 1\n")
	r := w.sh("mkdir -p src && printf 'version: 1\\nworkspace: ..\\nnetwork:\\n  allow:\\n    - {cidr: 0.0.0.0/0, ports: [443]}\\n' > src/cordon.yaml; " +
		"echo '# widened' >> lib/cordon.yaml; echo done")
	assertContains(t, "ran", r.stdout, "done")
	for _, p := range []string{"src/cordon.yaml", "lib/cordon.yaml"} {
		assertAbsent(t, filepath.Join(w.ws, p))
		if _, err := os.Stat(filepath.Join(w.ws, p+".cordon-quarantine")); err != nil {
			t.Errorf("%s was not quarantined: %v\n%v", p, err, r)
		}
	}
	assertContains(t, "cordon says so", r.stderr, "so that no later run reads it")
}

// TestRunInsideAWatchedWorkspaceRefused: a run whose workspace is inside a running
// session's workspace would have its placeholders (an empty .git, cordon.yaml) taken
// for a planted repository and contract by that session's live quarantine and renamed
// from under its sandbox. It is refused before it makes any, naming the session, as
// is a run in the session's own workspace (one workspace tree, one live run:
// lockWorkspace); one in the subdirectory after the session has ended runs.
func TestRunInsideAWatchedWorkspaceRefused(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	sub := filepath.Join(w.ws, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	id := w.startSession()
	runIn := func(dir string, args ...string) result {
		t.Helper()
		cmd := exec.Command(testutil.Cordon(t), args...)
		cmd.Dir, cmd.Env = dir, w.env
		return runResult(t, cmd, "cordon")
	}
	r := runIn(sub, "run", "--", "true")
	if r.code != 125 || !strings.Contains(r.stderr, "inside "+w.ws) || !strings.Contains(r.stderr, id) {
		t.Errorf("a run inside the session's workspace: want 125 naming the session: %v", r)
	}
	if entries, _ := os.ReadDir(sub); len(entries) > 0 {
		t.Errorf("the refused run left entries in its workspace: %v", entries)
	}
	if r := w.cordon("", "run", "--", "true"); r.code != 125 || !strings.Contains(r.stderr, "is the workspace of run "+id) {
		t.Errorf("a run in the session's own workspace: want 125 naming the session: %v", r)
	}
	if r := w.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatalf("session stop: %v", r)
	}
	if r := runIn(sub, "run", "--", "echo", "ran"); r.code != 0 || r.stdout != "ran\n" {
		t.Errorf("a run in the subdirectory once the session ended: %v", r)
	}
}

// TestWatchingRunRefusedAroundALiveNestedRun: the other order. A session runs in a
// subdirectory; a run of the directory holding it would watch a tree containing the
// session's placeholders and take any it made later for planted ones. The outer run is
// refused once it has said it watches (so two runs starting at the same instant cannot
// both pass), naming the session; the session's workspace is left as it was and the
// session still runs commands.
func TestWatchingRunRefusedAroundALiveNestedRun(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	sub := filepath.Join(w.ws, "sub")
	mustMkdir(t, sub)
	inSub := func(args ...string) result {
		t.Helper()
		cmd := exec.Command(testutil.Cordon(t), args...)
		cmd.Dir, cmd.Env = sub, w.env
		return runResult(t, cmd, "cordon")
	}
	r := inSub("session", "start")
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || id == "" {
		t.Fatalf("session start in sub: %v", r)
	}
	t.Cleanup(func() { inSub("session", "stop", id) })
	before := dirNames(t, sub)
	if r := w.cordon("", "run", "--", "true"); r.code != 125 || !strings.Contains(r.stderr, "holds "+sub) || !strings.Contains(r.stderr, id) {
		t.Errorf("a run of the directory holding a live session's workspace: want 125 naming the session, got %v", r)
	}
	if after := dirNames(t, sub); !slices.Equal(before, after) {
		t.Errorf("the refused run changed the session's workspace: %v, then %v", before, after)
	}
	if r := inSub("exec", id, "--", "echo", "still"); r.code != 0 || r.stdout != "still\n" {
		t.Errorf("the session after the refused run: %v", r)
	}
	if r := inSub("session", "stop", id); r.code != 0 {
		t.Fatalf("session stop: %v", r)
	}
	if r := w.cordon("", "run", "--", "echo", "ran"); r.code != 0 || r.stdout != "ran\n" {
		t.Errorf("the outer run once the session ended: %v", r)
	}
}

// dirNames lists dir's entries, a directory's name ending in "/".
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() {
			n += "/"
		}
		names = append(names, n)
	}
	return names
}

// TestKernelFilesystemWorkspaceRefused: a workspace or a writable grant on one of the
// kernel's own file systems is refused (125, naming it) before anything is made there:
// root's placeholders would be a mkdir in procfs or a cgroup hierarchy (a new cgroup),
// and the sandbox would write the host kernel's interfaces.
func TestKernelFilesystemWorkspaceRefused(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	cmd := exec.Command(testutil.Cordon(t), "run", "--", "true")
	cmd.Dir, cmd.Env = "/proc/sys/kernel", w.env
	if r := runResult(t, cmd, "cordon"); r.code != 125 || !strings.Contains(r.stderr, "/proc/sys/kernel is on proc, a kernel file system") {
		t.Errorf("a run in /proc/sys/kernel: want 125 naming proc, got %v", r)
	}
	cg, _, err := linux.CgroupMounts()
	if err != nil || cg == "" {
		t.Fatalf("no cgroup2 hierarchy: %q, %v", cg, err)
	}
	before := dirNames(t, cg)
	w.contract("version: 1\nfilesystem:\n  writable: [" + cg + "]\n")
	if r := w.cordon("", "run", "--", "true"); r.code != 125 || !strings.Contains(r.stderr, cg+" is on cgroup2, a kernel file system") {
		t.Errorf("a writable grant of the cgroup hierarchy: want 125 naming cgroup2, got %v", r)
	}
	if after := dirNames(t, cg); !slices.Equal(before, after) {
		t.Errorf("the refused run changed %s: %v, then %v", cg, before, after)
	}
}
