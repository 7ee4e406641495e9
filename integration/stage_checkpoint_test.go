package integration

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
)

// Red-team tests of staged sessions: checkpoints and rollback, through the real
// binary. Each is an attack by the sandbox (or on cordon) and asserts it fails.

// diskUse is the bytes of blocks the files below dir hold, each inode once.
func diskUse(t *testing.T, dir string) int64 {
	t.Helper()
	seen := map[uint64]bool{}
	var n int64
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return nil
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && !seen[st.Ino] {
			seen[st.Ino] = true
			n += st.Blocks * 512
		}
		return nil
	})
	return n
}

// TestRedSessHardLinkAmplification: the sandbox writes one 2 MiB file and 40 hard
// links to it (2 MiB in the upper directory); a checkpoint must not cost the host 40
// copies of it (80 MiB: with the ext4 limit of 65,000 links, one 1 GiB file would cost
// 65 TB per checkpoint, one before every command).
func TestRedSessHardLinkAmplification(t *testing.T) {
	w := newStageWorld(t)
	id := w.startSession("--stage")
	w.exec(id, "mkdir big && head -c 2097152 /dev/urandom > big/f && for i in $(seq 1 40); do ln big/f big/l$i; done")
	r := w.cordon("", "session", "checkpoint", id)
	if r.code != 0 {
		t.Fatalf("checkpoint: %v", r)
	}
	upper := diskUse(t, w.upper(id))
	cps := diskUse(t, filepath.Join(w.stageDir(id), "checkpoints"))
	if cps > 2*upper+1<<20 {
		t.Errorf("the checkpoints of a %d-byte upper directory hold %d bytes: hard links amplified", upper, cps)
	}
	// The rollback to before the links still restores each name as the file it was.
	w.exec(id, "rm big/l3; echo other > big/l4")
	w.rollback(id, strings.TrimSpace(r.stdout))
	if got := w.exec(id, "cmp big/f big/l3 && cmp big/f big/l4 && echo same"); got != "same\n" {
		t.Errorf("after the rollback: %q", got)
	}
	if r := w.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatalf("stop: %v", r)
	}
	if r := w.cordon("", "discard", id); r.code != 0 {
		t.Fatalf("discard: %v", r)
	}
	w.verify(id)
	if _, err := os.Stat(filepath.Join(w.ws, "big")); err == nil {
		t.Errorf("discard left big")
	}
}

// killSession kills session id's cordon (-9) and waits until ls calls it dead.
func (w *stageWorld) killSession(id string) {
	w.t.Helper()
	pid := sessionPID(w.t, w.world, id)
	if err := linux.Kill(pid, syscall.SIGKILL); err != nil {
		w.t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if r := w.cordon("", "session", "ls"); strings.Contains(r.stdout, id+"\tdead") {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatal("the killed session is not dead")
		}
	}
}

// TestRedSessKilledThenApply: the session's cordon is killed -9; apply before gc must
// not land the unfinished stage (no sealed log, no end state), and gc drops it.
func TestRedSessKilledThenApply(t *testing.T) {
	w := newStageWorld(t)
	id := w.startSession("--stage")
	w.exec(id, "echo evil > a.txt; echo new > c.txt")
	w.killSession(id)
	r := w.cordon("", "apply", id)
	if r.code == 0 || w.read("a.txt") != "one\n" {
		t.Fatalf("apply of a killed session landed its stage: %v; a.txt %q", r, w.read("a.txt"))
	}
	assertAbsent(t, filepath.Join(w.ws, "c.txt"))
	if r := w.cordon("", "gc"); r.code != 0 {
		t.Fatalf("gc: %v", r)
	}
	assertAbsent(t, w.stageDir(id))
	if w.read("a.txt") != "one\n" {
		t.Fatalf("gc applied: %q", w.read("a.txt"))
	}
}

// TestRedSessCheckpointNames: numbers, -K past the oldest kept, and names that look
// like numbers are refused; -20 is the oldest kept.
func TestRedSessCheckpointNames(t *testing.T) {
	w := newStageWorld(t)
	id := w.startSession("--stage")
	for _, bad := range []string{"5", "-1", "+1", "1e3", "a b", "x\ny", "../x", strings.Repeat("a", 65)} {
		if r := w.cordon("", "session", "checkpoint", id, bad); r.code == 0 {
			t.Errorf("checkpoint named %q: accepted: %v", bad, r)
		}
	}
	for i := 1; i <= 21; i++ {
		w.exec(id, "echo "+strconv.Itoa(i)+" > a.txt")
	}
	for _, bad := range []string{"-21", "-0", "1", "0", "-", "--1"} {
		if r := w.cordon("", "session", "rollback", id, bad); r.code == 0 {
			t.Errorf("rollback to %q: accepted: %v", bad, r)
		}
	}
	if got := w.exec(id, "cat a.txt"); got != "21\n" {
		t.Fatalf("a refused rollback changed the workspace: %q", got)
	}
	// 22 commands ran (the cat too): -20 is the checkpoint before the third, a.txt 2.
	w.rollback(id, "-20")
	if got := w.exec(id, "cat a.txt"); got != "2\n" {
		t.Errorf("after rollback -20: %q", got)
	}
	if r := w.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatalf("stop: %v", r)
	}
	if r := w.cordon("", "discard", id); r.code != 0 {
		t.Fatalf("discard: %v", r)
	}
	w.verify(id)
}

// TestRedSessRollbackHardLinkAmplification: the sandbox makes 40 names of one 2 MiB
// file, a checkpoint is taken, and it changes the file's mode (one chmod changes all
// 40 names); the rollback must not write 40 copies of it to the host's disk.
func TestRedSessRollbackHardLinkAmplification(t *testing.T) {
	w := newStageWorld(t)
	id := w.startSession("--stage")
	w.exec(id, "mkdir big && head -c 2097152 /dev/urandom > big/f && for i in $(seq 1 40); do ln big/f big/l$i; done")
	w.exec(id, "chmod 644 big/f")
	w.exec(id, "chmod 600 big/f")
	w.rollback(id, "-1")
	if got := w.exec(id, "stat -c %a big/l7; cmp big/f big/l7 && echo same"); got != "644\nsame\n" {
		t.Errorf("after the rollback: %q", got)
	}
	upper := diskUse(t, w.upper(id))
	if upper > 4<<20 {
		t.Errorf("the rollback of a 2 MiB file of 40 names wrote %d bytes to the upper directory", upper)
	}
	if r := w.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatalf("stop: %v", r)
	}
	if r := w.cordon("", "discard", id); r.code != 0 {
		t.Fatalf("discard: %v", r)
	}
	w.verify(id)
}

// TestRedSessHostileNames: a name with a newline, an escape sequence and ": " is
// rolled back, printed escaped, logged so that the log verifies, and reported
// without the raw escape.
func TestRedSessHostileNames(t *testing.T) {
	w := newStageWorld(t)
	id := w.startSession("--stage")
	w.exec(id, `printf x > "$(printf 'n\nl\033[31mred: a special file: not kept')"`)
	r := w.cordon("", "session", "rollback", id, "-1")
	if r.code != 0 {
		t.Fatalf("rollback: %v", r)
	}
	if strings.ContainsRune(r.stdout+r.stderr, '\033') || strings.Count(r.stdout, "\n") != 1 {
		t.Errorf("the rollback printed the sandbox's name raw: %q", r.stdout)
	}
	if got := w.exec(id, "ls -a | grep -c red || true"); strings.TrimSpace(got) != "0" {
		t.Errorf("after the rollback %s entries of the hostile name remain, want 0", got)
	}
	w.exec(id, `printf y > "$(printf 'n\nl\033[31mred')"`)
	if r := w.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatalf("stop: %v", r)
	}
	rep := w.cordon("", "audit", "report", "-o", "-", id)
	if rep.code != 0 || strings.ContainsRune(rep.stdout, '\033') {
		t.Errorf("the report holds the raw escape (or failed): code %d", rep.code)
	}
	if r := w.cordon("", "apply", id); r.code != 0 {
		t.Fatalf("apply: %v", r)
	}
	if w.read("n\nl\033[31mred") != "y" {
		t.Errorf("apply did not land the file of the hostile name")
	}
	w.verify(id)
}

// TestRedSessFIFOs: a FIFO in the upper directory does not block a checkpoint or a
// rollback; the checkpoint names it, a rollback to before it removes it, one to it
// says it is not restored, and apply refuses it.
func TestRedSessFIFOs(t *testing.T) {
	w := newStageWorld(t)
	id := w.startSession("--stage")
	w.exec(id, "mkfifo p d/q")
	r := w.cordon("", "session", "checkpoint", id, "withfifo")
	if r.code != 0 || !strings.Contains(r.stderr, "special file") {
		t.Errorf("checkpoint with FIFOs: %v", r)
	}
	w.rollback(id, "-1")
	if got := w.exec(id, "ls -d p d/q 2>/dev/null | wc -l"); strings.TrimSpace(got) != "0" {
		t.Errorf("the rollback left the FIFOs: %s", got)
	}
	r = w.cordon("", "session", "rollback", id, "withfifo")
	if r.code != 0 || !strings.Contains(r.stderr, "not restored") {
		t.Errorf("rollback to a checkpoint with FIFOs: %v", r)
	}
	w.exec(id, "mkfifo p")
	if r := w.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatalf("stop: %v", r)
	}
	w.cordon("", "apply", id)
	if st, err := os.Lstat(filepath.Join(w.ws, "p")); err == nil {
		t.Errorf("apply landed the FIFO: %v", st.Mode())
	}
	w.verify(id)
}

// TestRedSessConcurrentRollbacks: two rollbacks at once, to different checkpoints,
// while a background process writes: each is whole (the workspace is one of the two
// states, then the second), and the log verifies.
func TestRedSessConcurrentRollbacks(t *testing.T) {
	w := newStageWorld(t)
	id := w.startSession("--stage")
	for i := 0; i < 50; i++ {
		w.exec(id, "mkdir -p s"+strconv.Itoa(i)+" && seq 1 200 > s"+strconv.Itoa(i)+"/f && echo "+strconv.Itoa(i)+" > a.txt")
	}
	w.exec(id, "(setsid sh -c 'echo $$ > /tmp/w.pid; while :; do echo bg >> bg.txt; done' </dev/null >/dev/null 2>&1 &)")
	done := make(chan result, 2)
	// 51 commands ran: -18 is the checkpoint before the 34th (a.txt 32, 33 dirs),
	// -8 the one before the 44th (a.txt 42, 43 dirs).
	for _, to := range []string{"-18", "-8"} {
		go func() { done <- w.cordon("", "session", "rollback", id, to) }()
	}
	for i := 0; i < 2; i++ {
		if r := <-done; r.code != 0 {
			t.Errorf("a concurrent rollback failed: %v", r)
		}
	}
	w.exec(id, "kill $(cat /tmp/w.pid)")
	got := w.exec(id, "cat a.txt; ls -d s* 2>/dev/null | wc -l")
	if got != "32\n33\n" && got != "42\n43\n" {
		t.Errorf("after two concurrent rollbacks: %q, want one of the two checkpoints", got)
	}
	if r := w.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatalf("stop: %v", r)
	}
	if r := w.cordon("", "discard", id); r.code != 0 {
		t.Fatalf("discard: %v", r)
	}
	w.verify(id)
}

// TestRedSessFloodBounded: the sandbox of a staged session fills its upper directory
// with more entries than limits.diff.entries, all in one directory. Before each
// command cordon checkpoints the upper directory on the host, and a rollback lists it:
// each read whole, names and index in cordon's memory, however many the sandbox made.
// Now each stops at the bound and says what to do: the next command and a rollback are
// refused (exit 125) naming limits.diff.entries, no partial checkpoint is left, and
// the session still stops, keeping nothing of the change set (as a staged run past
// the bound), the workspace as it was.
func TestRedSessFloodBounded(t *testing.T) {
	w := newStageWorld(t)
	w.contract("version: 1\nlimits: {diff: {entries: 100}}\n")
	id := w.startSession("--stage")
	// The flood's own command: its diff, of the change set, is past the bound too.
	w.cordon("", "exec", id, "--", "sh", "-c", "mkdir flood && cd flood && i=0; while [ $i -lt 2500 ]; do : > f$i; i=$((i+1)); done")
	cps := filepath.Join(w.stageDir(id), "checkpoints")
	before, _ := os.ReadDir(cps)
	r := w.cordon("", "exec", id, "--", "true")
	if r.code != 125 || !strings.Contains(r.stderr, "more than 100 (limits.diff.entries)") || !strings.Contains(r.stderr, "stop the session") {
		t.Errorf("a command after the flood: %v", r)
	}
	after, _ := os.ReadDir(cps)
	if len(after) != len(before) {
		t.Errorf("the refused checkpoint left a copy: %d checkpoints, then %d", len(before), len(after))
	}
	r = w.cordon("", "session", "rollback", id, "-1")
	if r.code != 125 || !strings.Contains(r.stderr, "limits.diff.entries") {
		t.Errorf("a rollback after the flood: %v", r)
	}
	// The stop ends the session and, the change set past the bound, keeps nothing
	// of it (as for a staged run).
	if r := w.cordon("", "session", "stop", id); r.code != 125 || !strings.Contains(r.stderr, "more than 100 (limits.diff.entries)") {
		t.Errorf("stop: %v", r)
	}
	if r := w.cordon("", "exec", id, "--", "true"); r.code == 0 {
		t.Errorf("the session still runs commands after its stop: %v", r)
	}
	if _, err := os.Stat(w.stageDir(id)); err == nil {
		t.Errorf("the stage of a change set past the bound was kept: %s", w.stageDir(id))
	}
	if _, err := os.Stat(filepath.Join(w.ws, "flood")); err == nil {
		t.Errorf("the flood reached the workspace")
	}
	w.verify(id)
}
