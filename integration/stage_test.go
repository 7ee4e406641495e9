package integration

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
)

// Staged runs (cordon run --stage, apply, discard) through the real binary on bwrap,
// which stages as root.

// stageWorld is a world with a workspace of three files and its own audit root.
type stageWorld struct {
	*world
	audit string
}

func newStageWorld(t *testing.T) *stageWorld {
	t.Helper()
	testutil.RequireRoot(t)
	w := &stageWorld{world: newWorld(t), audit: t.TempDir()}
	w.env = append(w.env, "CORDON_AUDIT_DIR="+w.audit)
	mustWrite(t, filepath.Join(w.ws, "a.txt"), "one\n")
	mustWrite(t, filepath.Join(w.ws, "b.txt"), "keep\n")
	mustWrite(t, filepath.Join(w.ws, "d", "x"), "x\n")
	return w
}

var stagedRunID = regexp.MustCompile(`staged run (\S+): (\d+) change`)

// stage runs script as a staged run and returns the run id.
func (w *stageWorld) stage(script string) string {
	w.t.Helper()
	r := w.cordon("", "run", "--stage", "--", "sh", "-c", script)
	m := stagedRunID.FindStringSubmatch(r.stderr)
	if r.code != 0 || m == nil {
		w.t.Fatalf("staged run: %v", r)
	}
	return m[1]
}

func (w *stageWorld) read(rel string) string {
	data, err := os.ReadFile(filepath.Join(w.ws, rel))
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(data)
}

func (w *stageWorld) verify(id string) {
	w.t.Helper()
	if r := w.cordon("", "audit", "verify", id); r.code != 0 {
		w.t.Fatalf("the log of %s does not verify after apply/discard: %v", id, r)
	}
}

func (w *stageWorld) stageDir(id string) string { return filepath.Join(w.audit, id, "stage") }

const stagedEdits = `echo two > a.txt; rm b.txt; echo new > c.txt; rm -r d; mkdir d; echo y > d/y; mkdir -p n/m; echo z > n/m/z`

func TestStagedWritesInvisibleUntilApply(t *testing.T) {
	w := newStageWorld(t)
	id := w.stage(stagedEdits + `; cat a.txt c.txt`)
	if got := w.read("a.txt") + w.read("b.txt") + w.read("d/x"); got != "one\nkeep\nx\n" {
		t.Fatalf("the staged run changed the workspace: %q", got)
	}
	for _, p := range []string{"c.txt", "d/y", "n"} {
		assertAbsent(t, filepath.Join(w.ws, p))
	}
	show := w.cordon("", "audit", "show", "--diff", id)
	for _, want := range []string{"M a.txt", "D b.txt", "A c.txt", "D d/x", "A d/y", "A n/m/z", "+two"} {
		assertContains(t, "the staged run's diff", show.stdout, want)
	}
	// A subset first: only c.txt and n/ land.
	if r := w.cordon("", "apply", id, "c.txt", "n"); r.code != 0 {
		t.Fatalf("apply c.txt n: %v", r)
	}
	if w.read("c.txt") != "new\n" || w.read("n/m/z") != "z\n" || w.read("a.txt") != "one\n" || w.read("b.txt") != "keep\n" {
		t.Fatalf("apply of a subset landed the wrong paths: a=%q b=%q c=%q", w.read("a.txt"), w.read("b.txt"), w.read("c.txt"))
	}
	w.verify(id)
	r := w.cordon("", "apply", id)
	if r.code != 0 {
		t.Fatalf("apply: %v", r)
	}
	if w.read("a.txt") != "two\n" || w.read("d/y") != "y\n" {
		t.Fatalf("apply did not land everything: a=%q d/y=%q", w.read("a.txt"), w.read("d/y"))
	}
	assertAbsent(t, filepath.Join(w.ws, "b.txt"))
	assertAbsent(t, filepath.Join(w.ws, "d", "x"))
	w.verify(id)
	assertAbsent(t, w.stageDir(id))
	events, _ := os.ReadFile(filepath.Join(w.audit, id, "events.jsonl"))
	if n := strings.Count(string(events), `"type":"stage.apply"`); n != 2 {
		t.Errorf("want 2 stage.apply lines, got %d", n)
	}
	if r := w.cordon("", "apply", id); r.code != 1 || !strings.Contains(r.stderr, "nothing staged") {
		t.Errorf("a second apply: want exit 1 saying nothing is staged, got %v", r)
	}
}

func TestStagedDiscard(t *testing.T) {
	w := newStageWorld(t)
	id := w.stage(stagedEdits)
	r := w.cordon("", "discard", id)
	if r.code != 0 {
		t.Fatalf("discard: %v", r)
	}
	if got := w.read("a.txt") + w.read("b.txt") + w.read("d/x"); got != "one\nkeep\nx\n" {
		t.Fatalf("discard changed the workspace: %q", got)
	}
	assertAbsent(t, filepath.Join(w.ws, "c.txt"))
	assertAbsent(t, w.stageDir(id))
	w.verify(id)
	show := w.cordon("", "audit", "show", id)
	assertContains(t, "the timeline", show.stdout, "stage DISCARD")
	if r := w.cordon("", "apply", id); r.code != 1 {
		t.Errorf("apply after discard: want exit 1, got %v", r)
	}
}

// TestStagedApplyRefusesConflicts: the workspace changed underneath a staged file
// after the run: apply names it and lands nothing at all; --force lands over it.
func TestStagedApplyRefusesConflicts(t *testing.T) {
	w := newStageWorld(t)
	id := w.stage(`echo staged > a.txt; echo new > c.txt; echo staged > b.txt`)
	mustWrite(t, filepath.Join(w.ws, "a.txt"), "edited on the host\n")
	if err := os.Remove(filepath.Join(w.ws, "b.txt")); err != nil {
		t.Fatal(err)
	}
	r := w.cordon("", "apply", id)
	if r.code != 1 {
		t.Fatalf("apply over a conflict: want exit 1, got %v", r)
	}
	assertContains(t, "apply's refusal", r.stderr, "conflict: a.txt")
	assertContains(t, "apply's refusal", r.stderr, "conflict: b.txt")
	if w.read("a.txt") != "edited on the host\n" {
		t.Fatalf("the host's edit was overwritten: %q", w.read("a.txt"))
	}
	assertAbsent(t, filepath.Join(w.ws, "c.txt")) // nothing lands when anything conflicts
	if r := w.cordon("", "apply", "--force", id); r.code != 0 {
		t.Fatalf("apply --force: %v", r)
	}
	if w.read("a.txt") != "staged\n" || w.read("c.txt") != "new\n" {
		t.Fatalf("apply --force did not land: a=%q c=%q", w.read("a.txt"), w.read("c.txt"))
	}
	w.verify(id)
	events, _ := os.ReadFile(filepath.Join(w.audit, id, "events.jsonl"))
	assertContains(t, "the log", string(events), `"forced":true`)
}

// TestStagedApplyRefusesWhatTheContractDenied: the upper directory is the sandbox's
// writing. Entries it could not have made through the overlay (a git hook under the
// read-only .git, a device) are refused by apply, never landed, and named.
func TestStagedApplyRefusesWhatTheContractDenied(t *testing.T) {
	w := newStageWorld(t)
	mustMkdir(t, filepath.Join(w.ws, ".git", "hooks"))
	mustWrite(t, filepath.Join(w.ws, ".git", "HEAD"), "ref: refs/heads/main\n")
	id := w.stage(`echo hook > .git/hooks/pre-commit 2>/dev/null; echo ok > ok.txt`)
	upper := filepath.Join(w.stageDir(id), "upper")
	// What a hostile change set could hold, written where the sandbox's writes go.
	mustWrite(t, filepath.Join(upper, ".git", "hooks", "pre-commit"), "#!/bin/sh\necho pwned\n")
	if out, err := exec.Command("mknod", filepath.Join(upper, "dev"), "c", "1", "3").CombinedOutput(); err != nil {
		t.Fatalf("mknod: %v: %s", err, out)
	}
	r := w.cordon("", "apply", id)
	if r.code != 0 {
		t.Fatalf("apply: %v", r)
	}
	assertAbsent(t, filepath.Join(w.ws, ".git", "hooks", "pre-commit"))
	assertAbsent(t, filepath.Join(w.ws, "dev"))
	assertContains(t, "apply's report", r.stderr, "not applied: .git")
	assertContains(t, "apply's report", r.stderr, "not applied: dev: a special file")
	if w.read("ok.txt") != "ok\n" {
		t.Errorf("the allowed change did not land: %q", w.read("ok.txt"))
	}
	w.verify(id)
}

// TestStagedApplyFollowsNoLink: a directory of the workspace replaced by a link to
// outside after the run: apply, even forced, writes below the workspace only.
func TestStagedApplyFollowsNoLink(t *testing.T) {
	w := newStageWorld(t)
	id := w.stage(`echo staged > d/new`)
	outside := t.TempDir()
	if err := os.RemoveAll(filepath.Join(w.ws, "d")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(w.ws, "d")); err != nil {
		t.Fatal(err)
	}
	if r := w.cordon("", "apply", id); r.code != 1 {
		t.Fatalf("apply through a replaced directory: want a conflict (exit 1), got %v", r)
	}
	r := w.cordon("", "apply", "--force", id)
	assertAbsent(t, filepath.Join(outside, "new"))
	if r.code != 0 {
		t.Fatalf("apply --force: %v", r)
	}
	if fi, err := os.Lstat(filepath.Join(w.ws, "d")); err != nil || !fi.IsDir() {
		t.Fatalf("d should be a directory again: %v %v", fi, err)
	}
	if w.read("d/new") != "staged\n" {
		t.Errorf("d/new = %q", w.read("d/new"))
	}
}

// TestStagedApplyQuarantinesRepositories: a git repository the staged run made lands
// disarmed, as a direct run's would.
func TestStagedApplyQuarantinesRepositories(t *testing.T) {
	w := newStageWorld(t)
	id := w.stage(`mkdir -p sub/.git && printf '[core]\n\tfsmonitor = evil\n' > sub/.git/config && echo 'ref: refs/heads/m' > sub/.git/HEAD`)
	r := w.cordon("", "apply", id)
	if r.code != 0 {
		t.Fatalf("apply: %v", r)
	}
	assertAbsent(t, filepath.Join(w.ws, "sub", ".git"))
	if _, err := os.Stat(filepath.Join(w.ws, "sub", ".git.cordon-quarantine", "config")); err != nil {
		t.Errorf("the repository did not land quarantined: %v", err)
	}
	w.verify(id)
}

// TestStagedRunKilledThenGC: cordon killed -9 during a staged run leaves a partial
// change set; gc drops it, applies nothing, and nothing of the run is left.
func TestStagedRunKilledThenGC(t *testing.T) {
	w := newStageWorld(t)
	cmd := exec.Command(testutil.Cordon(t), "run", "--stage", "--", "sh", "-c", "echo half > a.txt; echo ready; exec sleep 600")
	cmd.Dir, cmd.Env = w.ws, w.env
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		t.Fatalf("the staged command did not start: %q", line)
	}
	entries, _ := os.ReadDir(w.audit)
	if len(entries) != 1 {
		t.Fatalf("want one run in the audit root, got %d", len(entries))
	}
	id := entries[0].Name()
	if _, err := os.Stat(filepath.Join(w.stageDir(id), "upper", "a.txt")); err != nil {
		t.Fatalf("the staged write is not in the stage: %v", err)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	// bwrap dies with its parent; wait until the sandbox's sleep is gone.
	for deadline := time.Now().Add(20 * time.Second); len(processesRunning("sleep 600")) > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the sandbox outlived its cordon")
		}
	}
	if r := w.cordon("", "gc"); r.code != 0 {
		t.Fatalf("gc: %v", r)
	}
	assertAbsent(t, w.stageDir(id))
	if w.read("a.txt") != "one\n" {
		t.Fatalf("gc applied a killed run's change: %q", w.read("a.txt"))
	}
	if entries, _ := os.ReadDir(w.runRoot); len(entries) > 0 {
		t.Errorf("the run root still holds %v", entries)
	}
	if r := w.cordon("", "apply", id); r.code != 1 {
		t.Errorf("apply of a collected run: want exit 1, got %v", r)
	}
}

// TestContainerStaged: the same staged runs on Docker and containerd, whose overlay
// is mounted on the host for the engine to bind and detached when the run ends.
func TestContainerStaged(t *testing.T) {
	forEachContainerBackend(t, func(t *testing.T, backend string) {
		for _, st := range []struct {
			name string
			fn   func(*testing.T)
		}{
			{"apply", TestStagedWritesInvisibleUntilApply},
			{"discard", TestStagedDiscard},
			{"conflicts", TestStagedApplyRefusesConflicts},
			{"contract", TestStagedApplyRefusesWhatTheContractDenied},
		} {
			t.Run(st.name, st.fn)
		}
		if mounts, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mounts), "staged-workspace") {
			t.Errorf("a staged overlay is still mounted on the host")
		}
	})
}

// mtimes matches the times of a change in an fs.diff line, JSON and patch, and the
// patch's length, which counts them (a time's text is as long as its fraction).
var mtimes = regexp.MustCompile(`,"(old|new)_mtime":"[^"]*"|mtime \S+ -> |,"patch_bytes":\d+`)

// TestStagedDiffEqualsDirect: the staged run's diff, taken through the overlay view,
// is the diff a direct run of the same command makes of the same workspace.
func TestStagedDiffEqualsDirect(t *testing.T) {
	script := stagedEdits + `; printf '\000\001bin' > blob.bin; chmod +x a.txt; mv c.txt c2.txt; mkdir -p build && echo o > build/out.o` +
		`; echo rebuilt > build/old.o; rm -r gone; rm -r opq; echo now a file > opq; mkdir -p nd/e && mv r.txt nd/e/r.txt` +
		`; rm f2d; mkdir f2d; echo in > f2d/in` +
		// Metadata alone: an mtime, an attribute, a directory's mode, an empty directory.
		`; touch -m -d 2001-02-03T04:05:06Z t.txt; chmod 700 md; mkdir emptyd` +
		`; python3 -c "import os; os.setxattr('x.txt', 'user.k', b'v')"`
	diffOf := func(stage bool) string {
		w := newStageWorld(t)
		for name, content := range map[string]string{
			".gitignore": "build/\n", "build/old.o": "old\n", "gone/p/q": "q\n", "gone/g": "g\n",
			"opq/i": "i\n", "opq/j/k": "k\n", "r.txt": "renamed into a new directory\n", "f2d": "file\n",
			"t.txt": "t\n", "md/f": "f\n", "x.txt": "x\n",
		} {
			mustWrite(t, filepath.Join(w.ws, filepath.FromSlash(name)), content)
		}
		args := []string{"run"}
		if stage {
			args = append(args, "--stage")
		}
		if r := w.cordon("", append(args, "--", "sh", "-c", script)...); r.code != 0 {
			t.Fatalf("run (stage %v): %v", stage, r)
		}
		entries, _ := os.ReadDir(w.audit)
		events, err := os.ReadFile(filepath.Join(w.audit, entries[len(entries)-1].Name(), "events.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(events), "\n") {
			if strings.Contains(line, `"type":"fs.diff"`) {
				body := line[strings.Index(line, `"body":`):strings.Index(line, `,"scan":`)]
				// The workspace's files are made anew for each run: their old times differ.
				return mtimes.ReplaceAllString(body, "")
			}
		}
		t.Fatalf("no fs.diff in the log (stage %v)", stage)
		return ""
	}
	direct, staged := diffOf(false), diffOf(true)
	for _, want := range []string{`"path":"blob.bin"`, `"path":"c2.txt"`, `"path":"d/y"`, `+two`,
		`"op":"touched","path":"t.txt"`, `"path":"md","kind":"dir","old_mode":"040755","new_mode":"040700"`,
		`"op":"added","path":"emptyd","kind":"dir"`, `"xattrs":[{"op":"added","name":"user.k","new_size":1,`,
		`"path":"gone/p/q"`, `"path":"opq/j/k"`, `"path":"nd/e/r.txt"`, `"path":"build/old.o"`, `"path":"f2d/in"`} {
		assertContains(t, "the direct diff", direct, want)
	}
	if direct != staged {
		t.Errorf("the staged diff differs from the direct one:\ndirect: %s\nstaged: %s", direct, staged)
	}
}

// TestStagedReportShowsPending: the HTML report and the timeline of a staged run say
// which changes wait for apply, which landed and which were dropped.
func TestStagedReportShowsPending(t *testing.T) {
	w := newStageWorld(t)
	id := w.stage(stagedEdits)
	state := func(html, path string) string {
		t.Helper()
		m := regexp.MustCompile(`<code>` + regexp.QuoteMeta(path) + `</code></td><td class="\w+">([^<]+)</td>`).FindStringSubmatch(html)
		if m == nil {
			t.Fatalf("the report has no staged row for %s:\n%s", path, html)
		}
		return m[1]
	}
	report := func() string {
		t.Helper()
		r := w.cordon("", "audit", "report", "-o", "-", id)
		if r.code != 0 {
			t.Fatalf("audit report: %v", r)
		}
		return r.stdout
	}
	html := report()
	assertContains(t, "the report before apply", html, `id="staged"`)
	for _, p := range []string{"a.txt", "b.txt", "c.txt", "n/m/z"} {
		if got := state(html, p); got != "pending" {
			t.Errorf("before apply, %s is %q, want pending", p, got)
		}
	}
	if r := w.cordon("", "apply", id, "c.txt", "n"); r.code != 0 {
		t.Fatalf("apply c.txt n: %v", r)
	}
	html = report()
	for p, want := range map[string]string{"c.txt": "applied", "n/m/z": "applied", "a.txt": "pending", "b.txt": "pending"} {
		if got := state(html, p); got != want {
			t.Errorf("after a subset apply, %s is %q, want %q", p, got, want)
		}
	}
	show := w.cordon("", "audit", "show", id)
	assertContains(t, "the timeline after a subset apply", show.stdout, "M a.txt  pending")
	if strings.Contains(show.stdout, "A c.txt  pending") {
		t.Errorf("the timeline lists an applied path as pending:\n%s", show.stdout)
	}
	if r := w.cordon("", "discard", id); r.code != 0 {
		t.Fatalf("discard: %v", r)
	}
	html = report()
	if got := state(html, "a.txt"); got != "discarded" {
		t.Errorf("after discard, a.txt is %q, want discarded", got)
	}
	if got := state(html, "c.txt"); got != "applied" {
		t.Errorf("after discard, the applied c.txt is %q, want applied", got)
	}
	assertContains(t, "the report after discard", html, "Nothing is pending.")
}

// TestStagedApplyRefusesAHostDeletionDuringTheRun: the sandbox edits a.txt (the overlay
// copies it up) and renames d/k; while the command still runs, the host deletes a.txt.
// The end finds a.txt missing: apply must not bring it back unasked, so it names the
// conflict and lands nothing (the rename, in a directory the host left alone, is no
// conflict of its own). With --force both land.
func TestStagedApplyRefusesAHostDeletionDuringTheRun(t *testing.T) {
	w := newStageWorld(t)
	mustWrite(t, filepath.Join(w.ws, "d", "k"), "kept\n")
	cmd := exec.Command(testutil.Cordon(t), "run", "--stage", "--", "sh", "-c", `echo staged >> a.txt; mv d/k d/k2; echo ready; read x; true`)
	cmd.Dir, cmd.Env = w.ws, w.env
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "ready\n" {
		t.Fatalf("the staged command did not start: %q; stderr: %s", line, stderr.String())
	}
	if err := os.Remove(filepath.Join(w.ws, "a.txt")); err != nil {
		t.Fatal(err)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("staged run: %v; stderr: %s", err, stderr.String())
	}
	m := stagedRunID.FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("no staged run id: %s", stderr.String())
	}
	id := m[1]
	r := w.cordon("", "apply", id)
	if r.code != 1 {
		t.Fatalf("apply over a file the host deleted during the run: want exit 1 (a conflict), got %v", r)
	}
	assertContains(t, "apply's refusal", r.stderr, "conflict: a.txt")
	assertAbsent(t, filepath.Join(w.ws, "a.txt"))
	if w.read("d/k") != "kept\n" {
		t.Fatalf("a refused apply moved d/k: %q", w.read("d/k"))
	}
	if r := w.cordon("", "apply", "--force", id); r.code != 0 {
		t.Fatalf("apply --force: %v", r)
	}
	if w.read("a.txt") != "one\nstaged\n" || w.read("d/k2") != "kept\n" {
		t.Fatalf("apply --force did not land: a=%q d/k2=%q", w.read("a.txt"), w.read("d/k2"))
	}
	assertAbsent(t, filepath.Join(w.ws, "d", "k"))
	w.verify(id)
}

// TestStagedRenameIsNoConflict: a file the sandbox only renamed, in a workspace the host
// left alone, lands without a conflict (the overlay's copy-up record alone is no
// reason to refuse).
func TestStagedRenameIsNoConflict(t *testing.T) {
	w := newStageWorld(t)
	id := w.stage(`mv d/x d/x2; echo more >> b.txt`)
	if r := w.cordon("", "apply", id); r.code != 0 {
		t.Fatalf("apply of a rename: %v", r)
	}
	if w.read("d/x2") != "x\n" || w.read("b.txt") != "keep\nmore\n" {
		t.Fatalf("apply of a rename: d/x2=%q b=%q", w.read("d/x2"), w.read("b.txt"))
	}
	assertAbsent(t, filepath.Join(w.ws, "d", "x"))
}
