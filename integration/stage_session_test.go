package integration

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
)

// Staged sessions (cordon session start --stage): checkpoints, rollback, and the
// stage applied or discarded after stop, through the real binary.

// exec runs script in session id and returns its stdout.
func (w *stageWorld) exec(id, script string) string {
	w.t.Helper()
	r := w.cordon("", "exec", id, "--", "sh", "-c", script)
	if r.code != 0 {
		w.t.Fatalf("exec %q: %v", script, r)
	}
	return r.stdout
}

func (w *stageWorld) rollback(id, to string) string {
	w.t.Helper()
	r := w.cordon("", "session", "rollback", id, to)
	if r.code != 0 {
		w.t.Fatalf("rollback %s: %v", to, r)
	}
	return r.stdout
}

// show prints what the staged workspace holds, as the sandbox sees it.
const show = `for f in a.txt b.txt d/x n/m/z e; do if [ -e $f ]; then echo "$f: $(cat $f 2>/dev/null || echo dir)"; else echo "$f: -"; fi; done`

// TestStagedSessionRollback: rollback -1 undoes an edited file, a deleted one, a new
// directory and a deleted one; a named checkpoint is rolled back to; the workspace
// is untouched until apply, which lands the rolled-back state only.
func TestStagedSessionRollback(t *testing.T) {
	w := newStageWorld(t)
	id := w.startSession("--stage")
	before := w.exec(id, show)
	assertContains(t, "the staged workspace", before, "a.txt: one")
	for _, step := range []struct{ name, script, want string }{
		{"edited", "echo two > a.txt", "a.txt: two"},
		{"deleted", "rm b.txt", "b.txt: -"},
		{"new directory", "mkdir -p n/m && echo z > n/m/z", "n/m/z: z"},
		{"deleted directory", "rm -r d", "d/x: -"},
	} {
		assertContains(t, step.name, w.exec(id, step.script+"; "+show), step.want)
		w.rollback(id, "-1")
		if got := w.exec(id, show); got != before {
			t.Errorf("%s: after rollback -1 the workspace shows\n%s\nwant\n%s", step.name, got, before)
		}
	}
	w.exec(id, "echo mid > a.txt; rm b.txt")
	r := w.cordon("", "session", "checkpoint", id, "mid")
	if r.code != 0 {
		t.Fatalf("checkpoint: %v", r)
	}
	n := strings.TrimSpace(r.stdout)
	mid := w.exec(id, show)
	w.exec(id, "echo late > a.txt; rm -r d; mkdir e; echo b > b.txt")
	w.rollback(id, "mid")
	if got := w.exec(id, show); got != mid {
		t.Errorf("after rollback to mid:\n%s\nwant\n%s", got, mid)
	}
	w.exec(id, "echo later > a.txt")
	w.rollback(id, n) // the same checkpoint, by number
	if got := w.exec(id, show); got != mid {
		t.Errorf("after rollback to %s:\n%s\nwant\n%s", n, got, mid)
	}
	for _, bad := range []string{"-99", "nosuch", "12345"} {
		if r := w.cordon("", "session", "rollback", id, bad); r.code == 0 || !strings.Contains(r.stderr, "no ") {
			t.Errorf("rollback to %s: want a refusal: %v", bad, r)
		}
	}
	if w.read("a.txt") != "one\n" || w.read("b.txt") != "keep\n" {
		t.Fatalf("the workspace changed before apply: %q %q", w.read("a.txt"), w.read("b.txt"))
	}
	if r := w.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatalf("stop: %v", r)
	}
	assertAbsent(t, filepath.Join(w.stageDir(id), "checkpoints"))
	// The report's staged panel lists what the diffs and rollbacks add up to: the
	// directory a command made and a rollback removed is not pending.
	report := w.cordon("", "audit", "report", "-o", "-", id)
	if report.code != 0 {
		t.Fatalf("audit report: %v", report)
	}
	staged := regexp.MustCompile(`<code>([^<]+)</code></td><td class="\w+">pending</td>`).FindAllStringSubmatch(report.stdout, -1)
	var pending []string
	for _, m := range staged {
		pending = append(pending, m[1])
	}
	if !slices.Contains(pending, "a.txt") || slices.Contains(pending, "n/m/z") || slices.Contains(pending, "e") {
		t.Errorf("the report's pending paths after the rollbacks: %q; want a.txt, and neither n/m/z nor e", pending)
	}
	if r := w.cordon("", "apply", id); r.code != 0 {
		t.Fatalf("apply: %v", r)
	}
	if w.read("a.txt") != "mid\n" || w.read("d/x") != "x\n" {
		t.Errorf("apply landed %q, %q; want the rolled-back state", w.read("a.txt"), w.read("d/x"))
	}
	for _, p := range []string{"b.txt", "e", "n"} {
		assertAbsent(t, filepath.Join(w.ws, p))
	}
	assertAbsent(t, w.stageDir(id))
	w.verify(id)
	events, _ := os.ReadFile(filepath.Join(w.audit, id, "events.jsonl"))
	for _, typ := range []string{`"type":"session.checkpoint"`, `"type":"session.rollback"`, `"name":"mid"`} {
		assertContains(t, "the log", string(events), typ)
	}
	if r := w.cordon("", "audit", "show", id); r.code != 0 || !strings.Contains(r.stdout, "ROLLBACK") {
		t.Errorf("audit show does not render the rollback: %v", r)
	}
}

// TestStagedSessionDiscard: after stop, discard drops the session's changes.
func TestStagedSessionDiscard(t *testing.T) {
	w := newStageWorld(t)
	id := w.startSession("--stage")
	w.exec(id, "echo two > a.txt; rm -r d")
	if r := w.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatalf("stop: %v", r)
	}
	if r := w.cordon("", "discard", id); r.code != 0 {
		t.Fatalf("discard: %v", r)
	}
	if w.read("a.txt") != "one\n" || w.read("d/x") != "x\n" {
		t.Errorf("discard touched the workspace")
	}
	assertAbsent(t, w.stageDir(id))
	w.verify(id)
}

// TestStagedSessionKilledThenGC: the session's cordon killed -9 leaves a stage with
// checkpoints; gc drops all of it and applies nothing.
func TestStagedSessionKilledThenGC(t *testing.T) {
	w := newStageWorld(t)
	id := w.startSession("--stage")
	w.exec(id, "echo two > a.txt")
	if r := w.cordon("", "session", "checkpoint", id, "k"); r.code != 0 {
		t.Fatalf("checkpoint: %v", r)
	}
	pid := sessionPID(t, w.world, id)
	if err := linux.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if r := w.cordon("", "session", "ls"); strings.Contains(r.stdout, id+"\tdead") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the killed session is not dead")
		}
	}
	if r := w.cordon("", "gc"); r.code != 0 {
		t.Fatalf("gc: %v", r)
	}
	assertAbsent(t, w.stageDir(id))
	assertAbsent(t, filepath.Join(w.runRoot, id))
	if w.read("a.txt") != "one\n" {
		t.Fatalf("gc applied a killed session's change: %q", w.read("a.txt"))
	}
	if r := w.cordon("", "apply", id); r.code != 1 {
		t.Errorf("apply of a collected session: want exit 1, got %v", r)
	}
}

// TestStagedSessionRollbackRacesLinks: a sandbox process swaps the directory being
// rolled back or checkpointed for a symbolic link to a host directory, over and over;
// a rollback fails or succeeds and never writes through the link, and a checkpoint
// never copies what the link points to.
func TestStagedSessionRollbackRacesLinks(t *testing.T) {
	w := newStageWorld(t)
	outside := t.TempDir()
	mustWrite(t, filepath.Join(outside, "secret"), "host only\n")
	id := w.startSession("--stage")
	w.exec(id, "rm -r d")
	w.exec(id, "(setsid sh -c 'echo $$ > /tmp/flip.pid; while :; do rm -rf d; ln -s "+outside+" d; rm -f d; mkdir d; echo y > d/y; done' </dev/null >/dev/null 2>&1 &)")
	for i := 0; i < 20; i++ {
		// Back to before rm -r d: d/x must be written in d, whatever d is then.
		if r := w.cordon("", "session", "rollback", id, "1"); r.code != 0 && r.code != 125 {
			t.Fatalf("rollback: %v", r)
		}
		if r := w.cordon("", "session", "checkpoint", id); r.code != 0 && r.code != 125 {
			t.Fatalf("checkpoint: %v", r)
		}
	}
	w.exec(id, "kill $(cat /tmp/flip.pid)")
	if entries, _ := os.ReadDir(outside); len(entries) != 1 || w.readAt(outside, "secret") != "host only\n" {
		t.Fatalf("the rollback wrote through the sandbox's link: %s holds %v", outside, entries)
	}
	_ = filepath.WalkDir(filepath.Join(w.stageDir(id), "checkpoints"), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "secret" {
			t.Errorf("a checkpoint copied the host file the sandbox linked to: %s", p)
		}
		return nil
	})
	if r := w.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatalf("stop: %v", r)
	}
	if r := w.cordon("", "discard", id); r.code != 0 {
		t.Fatalf("discard: %v", r)
	}
	if w.read("d/x") != "x\n" {
		t.Errorf("the workspace changed: d/x %q", w.read("d/x"))
	}
}

func (w *stageWorld) readAt(dir, rel string) string {
	data, _ := os.ReadFile(filepath.Join(dir, rel))
	return string(data)
}

// TestContainerStagedSession: the same on Docker and containerd, whose overlay is
// attached on the host for the engine and reached there by cordon.
func TestContainerStagedSession(t *testing.T) {
	forEachContainerBackend(t, func(t *testing.T, backend string) {
		for _, st := range []struct {
			name string
			fn   func(*testing.T)
		}{
			{"rollback", TestStagedSessionRollback},
			{"discard", TestStagedSessionDiscard},
			{"killed", TestStagedSessionKilledThenGC},
			{"links", TestStagedSessionRollbackRacesLinks},
			{"nothing", TestStagedNothingChangedVerifies},
		} {
			t.Run(st.name, st.fn)
		}
		if left := stagedMountsLeft(); len(left) > 0 {
			t.Errorf("a staged overlay is still mounted on the host: %v", left)
		}
	})
}
