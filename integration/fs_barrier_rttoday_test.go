package integration

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/gate/wire"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/testutil"
)

// Red team of the day (rttoday) against the barrier of a direct one-command run, its
// paced baseline and the diff it skips when nothing changed.

// runWithStdin runs cordon run -v -- argv in w with stdin and returns its result.
func runWithStdin(t *testing.T, w *world, stdin *os.File, argv ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testutil.Cordon(t), append([]string{"run", "-v", "--"}, argv...)...)
	cmd.Dir, cmd.Env, cmd.Stdin = w.ws, w.env, stdin
	return runResult(t, cmd, "cordon")
}

// TestRTTodayStdinDescriptorWrite: the caller's stdin is a file of the workspace open
// for reading and writing (`cordon run -- cmd <> data.bin`). Were that descriptor
// handed to the command as it is, the command would hold a descriptor open for
// writing that no held open gave it, and a write through it (write: not held) would
// land while the baseline is read, missing from the diff. HELD: the command's stdin
// is a pipe cordon copies into, never the caller's descriptor.
func TestRTTodayStdinDescriptorWrite(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	bigWorkspace(t, w, 8000)
	victim := filepath.Join(w.ws, "bulk", "15", "7999")
	f, err := os.OpenFile(victim, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := runWithStdin(t, w, f, "sh", "-c", `printf EVIL 2>/dev/null >&0; echo done`)
	if r.code != 0 || !strings.Contains(r.stdout, "done") {
		t.Fatalf("run: %v", r)
	}
	if heldCalls(r.stderr) < 0 {
		t.Fatalf("the run had no barrier:\n%s", r.stderr)
	}
	b, _ := os.ReadFile(victim)
	got, unread := diffOps(t, w)
	if string(b) != "bulk 7999\n" && got["bulk/15/7999"] != "modified" {
		t.Errorf("the command wrote %q into bulk/15/7999 through its stdin, and the diff has %q for it (unread=%v)", b, got["bulk/15/7999"], unread)
	}
	if string(b) != "bulk 7999\n" {
		t.Errorf("the command wrote through the caller's descriptor: %q", b)
	}
}

// TestRTTodaySkipHardLinkOutside: a file of the workspace has a second name outside
// it, in a directory the contract grants, on the same file system (a package
// manager's store whose files are hard-linked into the checkout: pnpm, cp -al). The
// command appends through the outside name and exits. The watch reports the write
// where it was made, outside the workspace; had the change set been empty, the
// barrier's skip would end the baseline unread and log an empty diff (scan.unread),
// where DiffWatched reads again every file that had other links at the baseline.
// HELD: the append's open is held, and a change outside the workspace on its file
// system is recorded as an object (objects=5 in the debug log), so the change set is
// not empty and the diff reads victim.txt.
func TestRTTodaySkipHardLinkOutside(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	bigWorkspace(t, w, 8000) // the baseline is still being read when the command ends
	store := filepath.Join(filepath.Dir(w.ws), "store")
	mustMkdir(t, store)
	w.contract("version: 1\nfilesystem:\n  writable: [\".\", \"" + store + "\"]\n")
	victim := filepath.Join(w.ws, "victim.txt")
	mustWrite(t, victim, "old content\n")
	if err := os.Link(victim, filepath.Join(store, "blob")); err != nil {
		t.Fatal(err)
	}
	r := w.cordon("", "run", "-v", "--", "sh", "-c", `printf 'EVIL\n' >> "$1" && echo wrote`, "sh", filepath.Join(store, "blob"))
	if r.code != 0 || !strings.Contains(r.stdout, "wrote") {
		t.Fatalf("run: %v", r)
	}
	if heldCalls(r.stderr) < 0 {
		t.Fatalf("the run had no barrier:\n%s", r.stderr)
	}
	if b, _ := os.ReadFile(victim); string(b) != "old content\nEVIL\n" {
		t.Fatalf("the command did not write: %q", b)
	}
	got, unread := diffOps(t, w)
	if got["victim.txt"] != "modified" {
		t.Errorf("the command appended to victim.txt through its other name, and the diff has %q for it (unread=%v, diff %v):\n%s",
			got["victim.txt"], unread, got, grepLines(r.stderr, "diff"))
	}
}

// TestRTTodayGateWritesDuringBaseline: an approval gate runs its argv on the host, in
// the workspace (gate.Config.Workspace), at the command's request. The request goes
// over the gate socket (connect, sendmsg, read: none held) and does not hurry the
// baseline, which reads one directory at a time meanwhile; once approved, the gate's
// operation writes a file in each directory of bulk, some of which the baseline has
// not read yet. The baseline records those as they were before the command ran: the
// diff misses what the command had done on its behalf. Had the command waited for the
// baseline (no barrier), every file the gate wrote would be in the diff.
func TestRTTodayGateWritesDuringBaseline(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	sharedBulk(t, w)
	w.contract(`version: 1
gates:
  - {name: stamp, run: ["sh", "-c", "for d in bulk/*; do echo stamped > $d/gate-copy; done"], why: the build stamps its output}
`)
	b := w.background("run", "-v", "--", "sh", "-c", "cordon gate stamp && echo stamped")
	approved := false
	for deadline := time.Now().Add(30 * time.Second); !approved && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		r := w.cordon("", "gate", "ls", "--json")
		var ls struct {
			Pending []wire.Pending `json:"pending"`
		}
		if json.Unmarshal([]byte(r.stdout), &ls) == nil && len(ls.Pending) == 1 {
			if r := w.cordon("", "gate", "approve", ls.Pending[0].ID); r.code != 0 {
				t.Fatalf("gate approve: %v", r)
			}
			approved = true
		}
		select {
		case err := <-b.done:
			b.done <- err
			t.Fatalf("the run ended before its gate request showed: %v\n%s", err, b.stderr.String())
		default:
		}
	}
	if !approved {
		t.Fatal("the gate request never showed")
	}
	r := b.wait(t)
	if r.code != 0 || !strings.Contains(r.stdout, "stamped") {
		t.Fatalf("run: %v", r)
	}
	if heldCalls(r.stderr) < 0 {
		t.Fatalf("the run had no barrier:\n%s", r.stderr)
	}
	got, unread := diffOps(t, w)
	var missing []string
	for i := range 64 {
		p := "bulk/" + strconv.Itoa(i) + "/gate-copy"
		if _, err := os.Stat(filepath.Join(w.ws, p)); err != nil {
			t.Fatalf("the gate did not write %s: %v", p, err)
		}
		if got[p] != "added" {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		t.Errorf("the gate the command asked for added 64 files during the run, and the diff misses %d of them (unread=%v): %v\n%s",
			len(missing), unread, missing, grepLines(r.stderr, "baseline"))
	}
}

// TestRTTodayPlaceholdersDuringBaseline: cordon makes, on the host, placeholders for
// missing denied paths of the workspace (and the directories above them) while the
// sandbox starts, which now runs beside a baseline that reads one directory at a time,
// and removes them at the end. HELD if a command that changes nothing gets an empty
// diff, and one that writes a file gets exactly that file: no placeholder shows as
// added or deleted, whichever side of the baseline's read it fell on.
func TestRTTodayPlaceholdersDuringBaseline(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	bigWorkspace(t, w, 8000)
	w.contract("version: 1\nfilesystem:\n  deny_read: [bulk/zz/a/b/secret, .envrc]\n")
	for _, tc := range []struct{ script, want string }{{"true", ""}, {"echo x > bulk/15/new", "bulk/15/new"}} {
		r := w.cordon("", "run", "-v", "--", "sh", "-c", tc.script)
		if r.code != 0 {
			t.Fatalf("run: %v", r)
		}
		if heldCalls(r.stderr) < 0 {
			t.Fatalf("the run had no barrier:\n%s", r.stderr)
		}
		got, unread := diffOps(t, w)
		for p, op := range got {
			if p != tc.want {
				t.Errorf("%q: %s %s in the diff (unread=%v)", tc.script, op, p, unread)
			}
		}
		if tc.want != "" && got[tc.want] != "added" {
			t.Errorf("%q: the diff has %q for %s", tc.script, got[tc.want], tc.want)
		}
	}
}

// TestRTTodayStdoutWorkspaceFIFO: the caller's stdout is a named pipe of the workspace
// (`cordon run -- make > build.fifo`, a log reader on the other side). cordon copies
// the command's output to a pipe at once (gateFor: "what is written there reaches the
// workspace only if a host process on the other side writes it there"), but a write
// to a named pipe changes the pipe itself, a file of the workspace: its modification
// time. Made before the baseline reads the pipe's directory, the change is in the
// baseline, and the diff misses it; the same run whose output comes after the
// baseline has bulk/63/out.fifo modified.
func TestRTTodayStdoutWorkspaceFIFO(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	sharedBulk(t, w)
	fifo := filepath.Join(w.ws, "bulk", "63", "out.fifo")
	if err := linux.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	// Open for reading and writing: the test is the reader, and the pipe never blocks
	// (the output is a few bytes).
	f, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	before, err := os.Lstat(fifo)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testutil.Cordon(t), "run", "-v", "--", "sh", "-c", "echo FROM-THE-COMMAND")
	cmd.Dir, cmd.Env, cmd.Stdout = w.ws, w.env, f
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("run: %v\n%s", err, errb.String())
	}
	if heldCalls(errb.String()) < 0 {
		t.Fatalf("the run had no barrier:\n%s", errb.String())
	}
	after, err := os.Lstat(fifo)
	if err != nil {
		t.Fatal(err)
	}
	if after.ModTime().Equal(before.ModTime()) {
		t.Fatalf("the output did not change the pipe's modification time (%v)", before.ModTime())
	}
	got, unread := diffOps(t, w)
	if got["bulk/63/out.fifo"] != "modified" {
		t.Errorf("cordon's copy of the output changed bulk/63/out.fifo (mtime %v -> %v), and the diff has %q for it (unread=%v, diff %v)",
			before.ModTime(), after.ModTime(), got["bulk/63/out.fifo"], unread, got)
	}
}
