package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
)

// Red team (rthost) of staged sessions' checkpoints and rollbacks, through the real
// binary: what the sandbox leaves in its upper directory must not make the session's
// supervisor, a host process, spend memory or CPU time without bound.

// cpuSeconds is the user and system CPU time process pid has spent (all threads).
func cpuSeconds(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return float64(ut+st) / 100 // USER_HZ
}

// readBytes is what process pid has read (rchar of /proc/PID/io), in bytes.
func readBytes(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "rchar:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	t.Fatalf("no rchar in /proc/%d/io", pid)
	return 0
}

// TestRthostRollbackReadsSparseWhole: the sandbox makes a 4 TiB sparse file (no
// blocks) and, in the next command, touches it (a new ctime, the same content). A
// rollback -1 compares the checkpoint's copy with the live file byte by byte
// (sameContent), holes read as zeros: terabytes read by the supervisor, not bounded
// by limits.diff.hash_file or .time, while it holds the session's lock. The rollback
// must end in a bounded time.
func TestRthostRollbackReadsSparseWhole(t *testing.T) {
	w := newStageWorld(t)
	id := w.startSession("--stage")
	w.exec(id, "truncate -s 4T big")
	w.exec(id, "touch big")
	pid := sessionPID(t, w.world, id)
	cpu0, read0 := cpuSeconds(t, pid), readBytes(t, pid)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, testutil.Cordon(t), "session", "rollback", id, "-1")
	cmd.Env, cmd.Dir = w.env, w.ws
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	cpu, read := cpuSeconds(t, pid)-cpu0, readBytes(t, pid)-read0
	if ctx.Err() != nil {
		t.Errorf("rollback -1 over a touched 4 TiB sparse file still ran after %v: the supervisor spent %.1f CPU s reading %d GiB of holes (8 TiB to read; the session is locked meanwhile)", took.Round(time.Second), cpu, read>>30)
		// The client gone, the supervisor reads on, and a stop waits on its lock.
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		stop := exec.CommandContext(sctx, testutil.Cordon(t), "session", "stop", id)
		stop.Env, stop.Dir = w.env, w.ws
		if out, err := stop.CombinedOutput(); sctx.Err() != nil {
			t.Errorf("session stop, after the rollback's client gave up, still waits after 10 s (%v %s)", err, out)
		}
		w.killSession(id) // the supervisor would read on for an hour
		return
	}
	t.Logf("rollback: %v in %v, %.1f CPU s: %s", err, took, cpu, out)
}

// deepTree is a perl script making a chain of argv[0] directories of 255-byte names
// (each level one entry, the path growing 256 bytes a level) and, in the deepest,
// argv[1] files.
const deepTree = `my ($d, $f) = @ARGV; my $n = "n" x 255;
for (1..$d) { mkdir $n or die "mkdir: $!"; chdir $n or die "chdir: $!" }
for my $i (1..$f) { open(my $h, ">", sprintf("%0250d", $i)) or die "open: $!"; close $h }`

// deepDepth is how deep TestRthostDeepTree* nest: 2,000 entries, far below the
// limits.diff.entries of 5,000 they set.
const deepDepth = 2000

// deepSession starts a staged session whose sandbox has made a chain of deepDepth
// directories of 255-byte names; it returns the session, its supervisor, and that
// supervisor's peak RSS before and after the command.
func deepSession(t *testing.T) (w *stageWorld, id string, pid int, before, after int64) {
	return deepSessionN(t, deepDepth)
}

func deepSessionN(t *testing.T, depth int) (w *stageWorld, id string, pid int, before, after int64) {
	w = newStageWorld(t)
	w.contract("version: 1\nlimits: {diff: {entries: 5000}}\n")
	id = w.startSession("--stage")
	pid = sessionPID(t, w.world, id)
	w.exec(id, "true")
	before = procStatus(t, pid, "VmHWM")
	if r := w.cordon("", "exec", id, "--", "perl", "-e", deepTree, strconv.Itoa(depth), "0"); r.code != 0 {
		t.Fatalf("the deep tree: %v", r)
	}
	return w, id, pid, before, procStatus(t, pid, "VmHWM")
}

// TestRthostDeepTreeDiffMemory: the sandbox makes a chain of 2,000 directories of
// 255-byte names: 2,000 entries, far below limits.diff.entries (5,000 here). The
// command's own diff, in the supervisor, holds the full path of each (the path at
// depth k is 256*k bytes): 128*D^2 bytes, 0.5 GB for D = 2,000, 1.3 TB for D =
// 100,000 (the default bound). The supervisor's memory must be bounded by the bound,
// not by the square of the depth.
func TestRthostDeepTreeDiffMemory(t *testing.T) {
	w, id, _, before, after := deepSession(t)
	fi, err := os.Stat(filepath.Join(w.audit, id, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("supervisor peak RSS %d MiB before the command, %d MiB after; log %d KiB", before>>20, after>>20, fi.Size()>>10)
	if grew := after - before; grew > 256<<20 {
		t.Errorf("the diff of 2,000 nested directories (limits.diff.entries 5,000) grew the supervisor's peak RSS by %d MiB", grew>>20)
	}
}

// TestRthostRollbackDeepTreeMemory: the same chain, then rollback -1: the rollback
// lists the upper directory (UpperPaths) as full paths kept whole, and walks it again
// (Unchanged) holding every ancestor's path: 128*D^2 bytes again and more.
func TestRthostRollbackDeepTreeMemory(t *testing.T) {
	w, id, pid, _, before := deepSession(t)
	r := w.cordon("", "session", "rollback", id, "-1")
	peak := procStatus(t, pid, "VmHWM")
	msg := r.stderr
	if len(msg) > 200 {
		msg = msg[:200] + fmt.Sprintf("... (%d bytes)", len(msg))
	}
	t.Logf("rollback: exit %d %s; supervisor peak RSS %d MiB before, %d MiB after", r.code, msg, before>>20, peak>>20)
	if grew := peak - before; grew > 256<<20 {
		t.Errorf("a rollback over 2,000 nested directories (limits.diff.entries 5,000) grew the supervisor's peak RSS by %d MiB", grew>>20)
	}
}

// TestRthostCheckpointIndexMemory: the sandbox makes 4,500 files whose paths are
// about 3,800 bytes long (14 nested directories of 255-byte names), then runs
// commands that change nothing. Each automatic checkpoint keeps an index of every
// file by its full path, and the session keeps 20 of them: the supervisor holds
// 20 * entries * PATH_MAX, which limits.diff.entries (the bound the commit claims)
// does not bound per checkpoint kept: 7.8 GiB at the default 100,000. Commands that
// change nothing must not grow the supervisor.
func TestRthostCheckpointIndexMemory(t *testing.T) {
	w := newStageWorld(t)
	id := w.startSession("--stage")
	if r := w.cordon("", "exec", id, "--", "perl", "-e", deepTree, "14", "4500"); r.code != 0 {
		t.Fatalf("the files: %v", r)
	}
	pid := sessionPID(t, w.world, id)
	w.exec(id, "true")
	w.exec(id, "true")
	before := procStatus(t, pid, "VmRSS")
	// Each checkpoint's index by full path is 17 MiB: 10 of them, 170 MiB.
	for i := 0; i < 10; i++ {
		w.exec(id, "true")
	}
	after := procStatus(t, pid, "VmRSS")
	t.Logf("supervisor RSS %d MiB after 3 checkpoints, %d MiB after 13", before>>20, after>>20)
	if grew := after - before; grew > 64<<20 {
		t.Errorf("10 commands that changed nothing grew the supervisor's RSS by %d MiB (4,500 files of 3,800-byte paths, limits.diff.entries 5,000)", grew>>20)
	}
}

// floodLater is a perl script run in the background: after argv[0] seconds (the
// rollback has listed the upper directory by then, and compares the big file), it
// makes argv[2] files of 200-byte names in the directory argv[1], as fast as it can.
const floodLater = `use Time::HiRes qw(sleep); my ($wait, $dir, $n) = @ARGV; sleep $wait;
for my $i (1..$n) { open(my $h, ">", "$dir/" . sprintf("%0200d", $i)) or last; close $h }`

// TestRthostRollbackFloodWhileRolling: the sandbox stages an 8 GiB sparse file
// (touched since the checkpoint, so the rollback compares it: seconds of reading)
// and an empty directory. A process it left running waits 1.5 s, the rollback
// comparing the big file meanwhile, then makes 200,000 files in the directory. The rollback counted at
// most limits.diff.entries (1,000) when it listed the upper directory, then reads the
// directory whole (syncDir, removeAll: Tree.Names) and logs every path it removed in
// one session.rollback line. What it holds and logs must stay bounded by the bound.
func TestRthostRollbackFloodWhileRolling(t *testing.T) {
	w := newStageWorld(t)
	w.contract("version: 1\nlimits: {diff: {entries: 1000}}\n")
	id := w.startSession("--stage")
	w.exec(id, "truncate -s 8G a_big && mkdir zflood")
	w.exec(id, "touch a_big; (setsid perl -e '"+floodLater+"' 1.5 zflood 200000 </dev/null >/dev/null 2>&1 &)")
	pid := sessionPID(t, w.world, id)
	before := procStatus(t, pid, "VmHWM")
	r := w.cordon("", "session", "rollback", id, "-1")
	peak := procStatus(t, pid, "VmHWM")
	fi, err := os.Stat(filepath.Join(w.audit, id, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	msg := r.stdout
	if len(msg) > 300 {
		msg = msg[:300] + fmt.Sprintf("... (%d bytes)", len(msg))
	}
	t.Logf("rollback: exit %d %s %s; supervisor peak RSS %d MiB before, %d MiB after; log %d MiB", r.code, msg, r.stderr, before>>20, peak>>20, fi.Size()>>20)
	if strings.Contains(r.stderr, "no answer") {
		t.Errorf("the rollback's answer did not reach its client: %s", r.stderr)
	}
	if grew := peak - before; grew > 64<<20 {
		t.Errorf("a rollback bounded to 1,000 entries grew the supervisor's peak RSS by %d MiB (a directory flooded while it ran)", grew>>20)
	}
	if fi.Size() > 8<<20 {
		t.Errorf("the session's log is %d MiB after a rollback bounded to 1,000 entries", fi.Size()>>20)
	}
}

// TestRthostMCPCheckpointsUnbounded: the agent, through `cordon mcp --stage`, makes
// 4,500 files of 3,800-byte paths (limits.diff.entries 5,000) and calls the checkpoint
// tool 12 times without changing anything. Checkpoints asked for are kept until the
// session stops, none pushed out, each with its index of every file by full path in
// the session's supervisor: the agent decides how many, and the host's memory grows with
// each. It must stay bounded.
func TestRthostMCPCheckpointsUnbounded(t *testing.T) {
	w := newStageWorld(t)
	w.contract("version: 1\nlimits: {diff: {entries: 5000}}\n")
	m := w.startMCP("--stage")
	var r execResult
	m.ok("exec", map[string]any{"command": "perl -e '" + deepTree + "' 14 4500"}, &r)
	pid := sessionPID(t, w.world, r.Session) // the session's supervisor, not cordon mcp
	m.ok("checkpoint", map[string]any{}, nil)
	m.ok("checkpoint", map[string]any{}, nil)
	before := procStatus(t, pid, "VmRSS")
	// Each checkpoint's index by full path is 17 MiB: 12 of them, 204 MiB.
	for i := 0; i < 12; i++ {
		m.ok("checkpoint", map[string]any{}, nil)
	}
	after := procStatus(t, pid, "VmRSS")
	t.Logf("exec: %+v; the supervisor's RSS %d MiB after 2 checkpoints, %d MiB after 14", r, before>>20, after>>20)
	if grew := after - before; grew > 64<<20 {
		t.Errorf("12 checkpoints the agent asked for, nothing changed, grew the session supervisor's RSS by %d MiB", grew>>20)
	}
}

// TestRthostRollbackLineUnbounded: no race this time. The sandbox makes 4,500 files
// of 3,800-byte paths (17 MiB of paths, within the default limits.diff.entries'
// 256 bytes per entry) in one command and appends to each
// in the next; rollback -1 restores them and lists every path it changed, whole, in its answer and in one
// session.rollback line of the log: 17 MiB here, entries * PATH_MAX (400 MB) at the
// default bound, again at every rollback. The answer must reach the client, and the
// line must not grow with the paths' length times their number.
func TestRthostRollbackLineUnbounded(t *testing.T) {
	w := newStageWorld(t)
	id := w.startSession("--stage")
	if r := w.cordon("", "exec", id, "--", "perl", "-e", deepTree, "14", "4500"); r.code != 0 {
		t.Fatalf("the files: %v", r)
	}
	const appendAll = `my $n = "n" x 255; chdir $n or die "chdir: $!" for 1..$ARGV[0];
opendir(my $d, ".") or die; for (readdir $d) { next if /^\./; open(my $h, ">>", $_) or die "$_: $!"; print $h "x"; close $h }`
	if r := w.cordon("", "exec", id, "--", "perl", "-e", appendAll, "14"); r.code != 0 {
		t.Fatalf("the edit: %v", r)
	}
	events := filepath.Join(w.audit, id, "events.jsonl")
	before, err := os.Stat(events)
	if err != nil {
		t.Fatal(err)
	}
	r := w.cordon("", "session", "rollback", id, "-1")
	after, err := os.Stat(events)
	if err != nil {
		t.Fatal(err)
	}
	grew := after.Size() - before.Size()
	t.Logf("rollback: exit %d %.300s; the log grew by %d KiB", r.code, r.stderr, grew>>10)
	if r.code != 0 {
		t.Errorf("rollback -1 of 4,500 edited files did not answer its client: %v", r.stderr)
	}
	if grew > 1<<20 {
		t.Errorf("rollback -1 of 4,500 edited files grew the session's log by %d KiB", grew>>10)
	}
}

// TestRthostRunDeepTreeMemory: the deep tree of TestRthostDeepTreeDiffMemory in a
// plain (direct) run: the run's diff, in cordon on the host, holds the same 128*D^2
// bytes of paths. cordon's peak must stay within a margin of a run that makes nothing.
func TestRthostRunDeepTreeMemory(t *testing.T) {
	w := newWorld(t)
	w.contract("version: 1\nlimits: {diff: {entries: 5000}}\n")
	_, base := cordonRSS(t, w, "run", "--", "true")
	r, peak := cordonRSS(t, w, "run", "--", "perl", "-e", deepTree, strconv.Itoa(deepDepth), "0")
	t.Logf("run: exit %d %.200s; cordon's peak RSS %d MiB, %d MiB for a run of nothing", r.code, r.stderr, peak>>20, base>>20)
	if peak-base > 256<<20 {
		t.Errorf("a run making 2,000 nested directories (limits.diff.entries 5,000) grew cordon's peak RSS by %d MiB", (peak-base)>>20)
	}
}
