package integration

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/internal/paths"
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

// Red-team tests of staged runs: each is an attack on cordon apply (which lands the
// sandbox's change set as root) or on the log it extends, and asserts it fails.

// upper is the staged run's upper directory, where a hostile change set is planted.
func (w *stageWorld) upper(id string) string { return filepath.Join(w.stageDir(id), "upper") }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

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
	// The placeholder lock is the run root's, as its sessions directory is.
	if entries, _ := os.ReadDir(w.runRoot); len(entries) > 0 && (len(entries) > 1 || entries[0].Name() != filepath.Base(paths.Root(w.runRoot).PlaceholderLock())) {
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
		if left := stagedMountsLeft(); len(left) > 0 {
			t.Errorf("a staged overlay is still mounted on the host: %v", left)
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

// TestStagedNothingChangedVerifies: a staged run or session that changed nothing
// leaves no stage, and its log, which says nothing is staged, verifies.
func TestStagedNothingChangedVerifies(t *testing.T) {
	w := newStageWorld(t)
	id := w.startSession("--stage")
	w.exec(id, "true")
	if r := w.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatalf("stop: %v", r)
	}
	assertAbsent(t, w.stageDir(id))
	w.verify(id)
	if r := w.cordon("", "run", "--stage", "--", "true"); r.code != 0 {
		t.Fatalf("run: %v", r)
	}
	if r := w.cordon("", "audit", "verify", "last"); r.code != 0 {
		t.Errorf("a staged run that changed nothing does not verify: %v", r)
	}
}

// TestStageRedStageOutOfReach: the staged command sees neither its own stage nor the
// audit root, and a direct run's writes never reach another run's stage.
func TestStageRedStageOutOfReach(t *testing.T) {
	w := newStageWorld(t)
	id := w.stage(`ls -a ` + w.audit + ` >/dev/null 2>&1 && echo SEEN > seen.txt; echo done > out.txt`)
	if _, err := os.Lstat(filepath.Join(w.upper(id), "seen.txt")); err == nil {
		t.Fatal("the staged command could list the audit root")
	}
	r := w.sh(`ls ` + w.audit + ` 2>&1; echo EVIL > ` + filepath.Join(w.upper(id), "out.txt") + ` 2>/dev/null; echo rc=$?`)
	if !strings.Contains(r.stdout, "rc=") || strings.Contains(r.stdout, "rc=0") {
		t.Fatalf("a direct run wrote another run's stage: %v", r)
	}
	data, _ := os.ReadFile(filepath.Join(w.upper(id), "out.txt"))
	if string(data) != "done\n" {
		t.Fatalf("the stage changed: %q", data)
	}
}

// TestStageRedWritableSubdirBypassesStage: a contract whose workspace is read-only
// but one of whose directories is writable: the staged run's writes there must wait
// in the stage like any other, not land at once in the real workspace (where,
// unwatched and unquarantined, a new repository stays armed).
func TestStageRedWritableSubdirBypassesStage(t *testing.T) {
	w := newStageWorld(t)
	mustMkdir(t, filepath.Join(w.ws, "sub"))
	w.contract("version: 1\nfilesystem:\n  writable: [sub]\n")
	id := w.stage(`echo hi > sub/x; mkdir -p sub/r/.git && printf '[core]\n\tfsmonitor = evil\n' > sub/r/.git/config; echo top > top.txt 2>/dev/null; true`)
	assertAbsent(t, filepath.Join(w.ws, "sub", "x"))
	assertAbsent(t, filepath.Join(w.ws, "sub", "r"))
	r := w.cordon("", "apply", id)
	if r.code != 0 {
		t.Fatalf("apply: %v", r)
	}
	if w.read("sub/x") != "hi\n" {
		t.Errorf("sub/x = %q", w.read("sub/x"))
	}
	assertAbsent(t, filepath.Join(w.ws, "sub", "r", ".git"))
	assertAbsent(t, filepath.Join(w.ws, "top.txt"))
	w.verify(id)
}

// TestStageRedGCAppliesNothing: gc after a finished staged run keeps the stage for
// apply or discard and lands nothing.
func TestStageRedGCAppliesNothing(t *testing.T) {
	w := newStageWorld(t)
	id := w.stage(`echo two > a.txt`)
	if r := w.cordon("", "gc"); r.code != 0 {
		t.Fatalf("gc: %v", r)
	}
	if w.read("a.txt") != "one\n" {
		t.Fatalf("gc applied: %q", w.read("a.txt"))
	}
	if _, err := os.Stat(w.upper(id)); err != nil {
		t.Fatalf("gc dropped a finished stage: %v", err)
	}
	if r := w.cordon("", "discard", id); r.code != 0 {
		t.Fatalf("discard: %v", r)
	}
	w.verify(id)
}

// TestStagedChangeSetBounded (bwrap): a staged run whose sandbox makes more entries
// than limits.diff.entries is refused at its end (125, naming the bound) instead of
// being read whole into cordon's memory, here and at apply; nothing of it is left
// staged, the workspace is untouched, and a change set within the bound still stages.
func TestStagedChangeSetBounded(t *testing.T) {
	w := newStageWorld(t)
	w.contract("version: 1\nlimits: {diff: {entries: 100}}\n")
	r := w.cordon("", "run", "--stage", "--", "sh", "-c", `mkdir big; i=0; while [ $i -lt 500 ]; do : > big/f$i; i=$((i+1)); done`)
	if r.code != 125 || !strings.Contains(r.stderr, "more than 100 (limits.diff.entries)") {
		t.Fatalf("a change set of 501 entries past entries: 100: want 125 naming the bound, got %v", r)
	}
	assertAbsent(t, filepath.Join(w.ws, "big"))
	if r := w.cordon("", "apply", "last"); r.code == 0 {
		t.Fatalf("apply of a refused change set succeeded: %v", r)
	}
	if entries, _ := os.ReadDir(w.audit); len(entries) != 1 {
		t.Errorf("the audit root holds %d entries, want the run's log alone", len(entries))
	} else if _, err := os.Stat(filepath.Join(w.audit, entries[0].Name(), "events.jsonl")); err != nil {
		t.Errorf("the refused run's log: %v", err)
	}
	// Within the bound the same contract stages and applies.
	id := w.stage(`mkdir small; i=0; while [ $i -lt 50 ]; do : > small/f$i; i=$((i+1)); done`)
	if r := w.cordon("", "apply", id); r.code != 0 {
		t.Fatalf("apply within the bound: %v", r)
	}
	if entries, _ := os.ReadDir(filepath.Join(w.ws, "small")); len(entries) != 50 {
		t.Errorf("apply landed %d files of 50", len(entries))
	}
}

// TestRedStagedDiffLinear (bwrap, root): the diff of a staged run costs cordon time in
// proportion to the change set, not its square. The red team's attack: a staged run
// that makes 30,000 empty files with long names. Each new path of the change set is a deep one, and
// cordon compared every path with every deep path before it: 20,000 files took 40 s
// of cordon's CPU after the command ended, 150,000 more than ten minutes, outside the
// run's cgroup and past its timeout, whatever limits.diff said.
func TestRedStagedDiffLinear(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	// entries past the change set: a staged change set larger than entries is refused
	// whole (TestStagedChangeSetBounded), and this attack is on the diff's time.
	w.contract("version: 1\nlimits: {diff: {entries: 40000}}\n")
	const files = 30_000
	flood := `my $n = shift; my $pad = "x" x 240; mkdir "big" or die; for my $i (1..$n) { open(my $f, ">", sprintf("big/%s%09d", $pad, $i)) or die "create: $!"; } print "made $n\n";`
	r := w.cordon("", "run", "--stage", "--", "perl", "-e", flood, strconv.Itoa(files))
	if r.code != 0 || !strings.Contains(r.stdout, "made "+strconv.Itoa(files)) {
		t.Fatalf("the staged flood did not run: %v", r)
	}
	var ended, diffed time.Time
	for _, rec := range lastRun(t, w) {
		switch rec.Type {
		case event.CmdEnd:
			ended = rec.TS
		case event.FSDiff:
			diffed = rec.TS
		}
	}
	work := diffed.Sub(ended)
	t.Logf("cmd.end to fs.diff: %v for %d staged files", work, files)
	if ended.IsZero() || diffed.IsZero() || work > 15*time.Second {
		t.Errorf("cmd.end to fs.diff took %v (cmd.end %v, fs.diff %v); want the diff of %d staged files well under 15s", work, ended, diffed, files)
	}
}
