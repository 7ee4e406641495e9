package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/internal/testutil"
)

// plantLyingIndex: a run under filesystem.git: commit (where the index and loose
// objects are writable, and an agent's commit changes them anyway) makes the index
// claim the blob of "evil!\n" for f.sh, whose content stays "good!\n" and whose stat
// data the entry already holds. The run's own diff shows .git/index, as any commit does.
func plantLyingIndex(t *testing.T) *world {
	w := newWorld(t)
	w.gitRepo()
	mustWrite(t, filepath.Join(w.ws, "f.sh"), "good!\n")
	hostGit(t, w.ws, "add", "f.sh")
	hostGit(t, w.ws, "commit", "-qm", "f")
	w.contract("version: 1\nfilesystem:\n  git: commit\n")
	hostGit(t, w.ws, "add", "cordon.yaml")
	hostGit(t, w.ws, "commit", "-qm", "contract")
	r := w.sh(`oid=$(printf 'evil!\n' | git hash-object -w --stdin) && python3 - "$oid" <<'PY'
import sys, hashlib
d = bytearray(open('.git/index', 'rb').read())
off = d.index(b'\x00\x04f.sh\x00') + 2 - 62 + 40
d[off:off+20] = bytes.fromhex(sys.argv[1])
d[-20:] = hashlib.sha1(bytes(d[:-20])).digest()
open('.git/index', 'wb').write(d)
print("planted")
PY`)
	assertContains(t, "plant", r.stdout, "planted")
	time.Sleep(300 * time.Millisecond) // out of the racy window
	if got, _ := os.ReadFile(filepath.Join(w.ws, "f.sh")); string(got) != "good!\n" {
		t.Fatalf("f.sh is %q", got)
	}
	return w
}

// TestRedGitIndexHidesWrite: in the next run the command overwrites f.sh ("good!")
// with "evil!" and hides the write behind a mode change, a rename, or shows it as a
// one-line change against the index's claim.
func TestRedGitIndexHidesWrite(t *testing.T) {
	for name, script := range map[string]string{
		"chmod":  `printf 'evil!\n' > f.sh && chmod +x f.sh`,
		"rename": `printf 'evil!\n' > g.sh && rm f.sh`,
		"append": `printf 'evil!\nok\n' > f.sh`,
	} {
		t.Run(name, func(t *testing.T) {
			w := plantLyingIndex(t)
			if r := w.sh(script); r.code != 0 {
				t.Fatalf("run: %v", r)
			}
			show := w.cordon("", "audit", "show", "--diff", "last")
			t.Logf("diff of the run:\n%s", show.stdout)
			if !strings.Contains(show.stdout, "-good!") && !strings.Contains(show.stdout, "rewritten with the content the git index recorded") {
				t.Errorf("%s: good! -> evil! is not in the diff, nor flagged as unverified", name)
			}
		})
	}
}

// TestRedRunEarlyChangesNotInBaseline: a command that changes the workspace the
// instant it starts, in a workspace large enough that its baseline takes a while, has
// every change in its diff: no byte of it ran while the baseline was being taken.
func TestRedRunEarlyChangesNotInBaseline(t *testing.T) {
	w := newWorld(t)
	for i := range 40 {
		for j := range 50 {
			mustWrite(t, filepath.Join(w.ws, fmt.Sprintf("d%02d/f%02d.txt", i, j)), "old\n")
		}
	}
	for round := range 3 {
		// Touch a file in the first, a middle and the last directory, whatever the
		// walk's order: one of them is read late.
		victim := fmt.Sprintf("d%02d/f%02d.txt", 20, round)
		script := fmt.Sprintf("echo new%d > d00/f00.txt; echo new%d > d39/f49.txt; rm %s; echo x > made%d",
			round, round, victim, round)
		if r := w.sh(script); r.code != 0 {
			t.Fatalf("round %d: %v", round, r)
		}
		types, diff := runEvents(t, w)
		if diff == nil {
			t.Fatalf("round %d: no fs.diff in %v", round, types)
		}
		got := map[string]string{}
		for _, c := range diff.Changes {
			got[c.Path] = c.Op
		}
		want := map[string]string{"d00/f00.txt": "modified", "d39/f49.txt": "modified", victim: "deleted", fmt.Sprintf("made%d", round): "added"}
		for p, op := range want {
			if got[p] != op {
				t.Errorf("round %d: %s is %q in the diff, want %q (a change hidden in the baseline); diff: %v", round, p, got[p], op, got)
			}
		}
	}
}

// TestSessionLogHasNoGaps: a change no command's diff holds — a background process
// of an earlier exec writing between two execs — is still in the log, as an fs.diff
// marked between commands.
func TestSessionLogHasNoGaps(t *testing.T) {
	w := newWorld(t)
	id := w.startSession()
	// The write comes well after the command's end is recorded on every backend: a
	// Pod's command ends once its workspace was brought back (a second or so here),
	// and a write before that is the command's own, in its diff.
	if r := w.cordon("", "exec", id, "--", "sh", "-c", "(sleep 3; echo sneaky > auth.py) >/dev/null 2>&1 &"); r.code != 0 {
		t.Fatal(r)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(filepath.Join(w.ws, "auth.py")); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	loggedBetweenCommands(t, w, id, "auth.py")
	show := w.cordon("", "audit", "show", id)
	if show.code != 0 || !strings.Contains(show.stdout, "auth.py") || !strings.Contains(show.stdout, "between commands") {
		t.Fatalf("audit show must show the change between commands: %v", show)
	}
}

// TestSessionLogHasNoGapsBeforeTheFirstCommand: the session's workspace is
// snapshotted as it starts, so a change made after the start and before its first
// command (on the host here) is in the log as an fs.diff between commands, not in
// no diff at all.
func TestSessionLogHasNoGapsBeforeTheFirstCommand(t *testing.T) {
	w := newWorld(t)
	id := w.startSession()
	if err := os.WriteFile(filepath.Join(w.ws, "early.py"), []byte("planted\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	loggedBetweenCommands(t, w, id, "early.py")
}

// loggedBetweenCommands runs one more command in session id, stops it, and checks that
// its log verifies and has an fs.diff between commands naming path.
func loggedBetweenCommands(t *testing.T, w *world, id, path string) {
	t.Helper()
	if r := w.cordon("", "exec", id, "--", "true"); r.code != 0 {
		t.Fatal(r)
	}
	if r := w.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatal(r)
	}
	found := false
	for _, ev := range sessionEvents(t, w, id) {
		if string(ev.Type) == "fs.diff" && strings.Contains(string(ev.Body), `"between_commands":true`) && strings.Contains(string(ev.Body), path) {
			found = true
		}
	}
	if !found {
		t.Fatalf("the change to %s made outside any command is not in the log", path)
	}
	if v := w.cordon("", "audit", "verify", id); v.code != 0 {
		t.Fatalf("verify: %v", v)
	}
}

// diffFlood is the red team's attack on the host side of the diff: a 60 GB sparse file
// (no disk used) that cordon hashed byte by byte for minutes, ARGV[0] empty files that
// made cordon grow by hundreds of MB and write one 40 MB fs.diff line, and a nested
// repository planted after them, past any bound on what the diff records.
const diffFlood = `my $n = shift;
truncate(do { open(my $f, ">", "huge.img") or die "huge: $!"; $f }, 60 * 1024**3) or die "truncate: $!";
mkdir "flood" or die;
for my $i (1..$n) { open(my $f, ">", sprintf("flood/f%06d", $i)) or die "create: $!"; }
mkdir "zz"; mkdir "zz/.git"; mkdir "zz/.git/hooks";
if (open(my $h, ">", "zz/.git/config")) { print $h "[core]\n\tfsmonitor = touch /tmp/pwned\n"; close $h; } # the live watch may have disarmed zz/.git
print "made $n\n";
`

// TestRedDiffBounded (bwrap): what the sandbox leaves in the workspace bounds what
// cordon does about it on the host. The exec ends in bounded time, the fs.diff line is
// bounded, the log says exactly what the diff did not do (the entries past the bound,
// the sparse file not hashed), it verifies, and the repository planted past the bound
// is still quarantined.
func TestRedDiffBounded(t *testing.T) {
	w := newWorld(t)
	// Making files in the sandbox runs at a few thousand a second on a busy machine,
	// so the flood is scaled down with the bound: 30,000 files past 5,000 entries is
	// the 200,000 past the default 100,000, six times over.
	const files = 30_000
	w.contract("version: 1\nlimits: {diff: {entries: 5000}}\n")
	start := time.Now()
	r := w.cordon("", "run", "--", "perl", "-e", diffFlood, strconv.Itoa(files))
	took := time.Since(start)
	if r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf("made %d", files)) {
		t.Fatalf("the flood did not run: %v", r)
	}
	if took > 100*time.Second {
		t.Errorf("cordon run took %v; want it bounded", took)
	}
	var d audit.FSDiff
	var size int
	var ended, diffed time.Time
	for _, rec := range lastRun(t, w) {
		if rec.Type == event.CmdEnd {
			ended = rec.TS
		}
		if rec.Type == event.FSDiff {
			diffed = rec.TS
			if err := rec.DecodeBody(&d); err != nil {
				t.Fatal(err)
			}
			size = len(rec.Body)
		}
	}
	// cordon's own work on the host after the command: unbounded, hashing 60 GB
	// took minutes.
	if work := diffed.Sub(ended); ended.IsZero() || work > 15*time.Second {
		t.Errorf("cmd.end to fs.diff took %v; want the diff bounded (well under 15s)", work)
	}
	t.Logf("cordon run: %v, diff %v; fs.diff line %d bytes, %d files, %d itemized, gap %+v", took, diffed.Sub(ended), size, d.Files, len(d.Changes), d.Gap)
	if size == 0 || size > 1<<20 {
		t.Errorf("fs.diff body is %d bytes; want one, at most 1 MiB", size)
	}
	g := d.Gap
	if g == nil {
		t.Fatalf("fs.diff records no gap; want the entries past limits.diff.entries counted")
	}
	if g.Unlisted == 0 || g.IncompleteDirs == 0 || len(g.IncompletePaths) == 0 {
		t.Errorf("gap %+v: want the unrecorded entries counted and their directories named", g)
	}
	if d.Files+g.Unlisted < files {
		t.Errorf("%d changes + %d unlisted < %d files made: the gap does not account for them", d.Files, g.Unlisted, files)
	}
	if g.NotHashed != 1 || len(g.NotHashedPaths) != 1 || g.NotHashedPaths[0] != "huge.img" {
		t.Errorf("gap %+v: want huge.img named as not hashed", g)
	}
	if _, err := os.Lstat(filepath.Join(w.ws, "zz", ".git.cordon-quarantine")); err != nil {
		t.Errorf("the repository planted past the bound was not quarantined: %v", err)
	}
	if v := w.cordon("", "audit", "verify", "last"); v.code != 0 || !strings.Contains(v.stdout, "limits.diff bound") {
		t.Errorf("audit verify: %v; want intact, with the gap counted", v)
	}
	show := w.cordon("", "audit", "show", "last")
	assertContains(t, "audit show", show.stdout, "GAP    diff incomplete:")
	assertContains(t, "audit show", show.stdout, "GAP    not hashed: huge.img")
}

// listingFlood makes ARGV[0] empty files with 240-character names in one directory,
// then plants a nested repository after them (its name sorts last; the live watch may
// disarm it first, hence no die there).
const listingFlood = `my $n = shift; my $pad = "x" x 240;
mkdir "big" or die;
for my $i (1..$n) { open(my $f, ">", sprintf("big/%s%09d", $pad, $i)) or die "create: $!"; }
mkdir "zz"; mkdir "zz/.git"; mkdir "zz/.git/hooks";
if (open(my $h, ">", "zz/.git/config")) { print $h "[core]\n\tfsmonitor = touch /tmp/pwned\n"; close $h; }
print "made $n\n";
`

// cordonRSS runs cordon in w's workspace and returns its result and its peak resident
// set size in bytes (the sandbox's processes are in other namespaces and cgroups, but
// a waited-for child counts: the flood's perl stays far below the margin).
func cordonRSS(t *testing.T, w *world, args ...string) (result, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testutil.Cordon(t), args...)
	cmd.Dir, cmd.Env = w.ws, w.env
	r := runResult(t, cmd, "cordon")
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		t.Fatal("no rusage")
	}
	return r, ru.Maxrss << 10
}

// TestRedDiffListingBounded (bwrap): the diff's entries bound also bounds what cordon
// holds of one directory. The red team's attack: one directory of many long names.
// cordon read every name into memory (sorted, to pick the first ones the bound lets
// it record) before the bound applied, and the quarantine sweep that runs after a
// bounded diff read the directory whole again (filepath.WalkDir), so cordon grew
// with the directory, whatever limits.diff.entries said. Now its peak stays within a
// margin of a run that makes nothing, the gap still counts every name, and the
// repository planted past the bound is still quarantined.
func TestRedDiffListingBounded(t *testing.T) {
	w := newWorld(t)
	// The flood's 150,000 creates may outlast the default minute on a loaded machine
	// whose file system is slow to allocate inodes (an ext4 without a journal).
	w.contract("version: 1\nlimits: {diff: {entries: 100}}\ncommands: {timeout: 3m}\n")
	// Without the bound on listing, 150,000 names of 250 bytes cost cordon about 100 MB.
	const files, margin = 150_000, 40 << 20
	base, baseRSS := cordonRSS(t, w, "run", "--", "true")
	if base.code != 0 {
		t.Fatalf("baseline run: %v", base)
	}
	r, rss := cordonRSS(t, w, "run", "--", "perl", "-e", listingFlood, strconv.Itoa(files))
	if r.code != 0 || !strings.Contains(r.stdout, "made "+strconv.Itoa(files)) {
		t.Fatalf("the flood did not run: %v", r)
	}
	t.Logf("cordon peak RSS: %d MiB for a run that makes nothing, %d MiB for the flood", baseRSS>>20, rss>>20)
	if rss > baseRSS+margin {
		t.Errorf("cordon's peak RSS grew by %d MiB for one directory of %d names past a bound of 100 entries; want at most %d MiB",
			(rss-baseRSS)>>20, files, margin>>20)
	}
	var d audit.FSDiff
	for _, rec := range lastRun(t, w) {
		if rec.Type == event.FSDiff {
			if err := rec.DecodeBody(&d); err != nil {
				t.Fatal(err)
			}
		}
	}
	if g := d.Gap; g == nil || d.Files+g.Unlisted < files || g.IncompleteDirs == 0 {
		t.Errorf("fs.diff: %d files, gap %+v: want every name of big/ counted", d.Files, d.Gap)
	}
	if _, err := os.Lstat(filepath.Join(w.ws, "zz", ".git.cordon-quarantine")); err != nil {
		t.Errorf("the repository planted past the bound was not quarantined: %v", err)
	}
}

// TestRedSessionPatchStorageBounded: a session whose commands rewrite text files
// again and again (each exec a patch of several MB) stores at most
// limits.diff.patch_run of patch files in the audit root for the whole session, not
// per command, and each command past it records the bytes it did not store.
func TestRedSessionPatchStorageBounded(t *testing.T) {
	w := newWorld(t)
	const bound = 8 << 20
	w.contract("version: 1\nlimits: {diff: {patch_run: 8MiB}}\n")
	id := w.startSession()
	const execs = 4
	for i := range execs {
		// Ten text files of 600 KB (under limits.diff.text, whose content the
		// diff keeps), each rewritten whole: a patch of about 12 MB a command.
		script := fmt.Sprintf("for f in 0 1 2 3 4 5 6 7 8 9; do seq 1 40000 | sed \"s/$/ version %d/\" > big$f.txt; done", i)
		if r := w.cordon("", "exec", id, "--", "sh", "-c", script); r.code != 0 {
			t.Fatalf("exec %d: %v", i, r)
		}
	}
	if r := w.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatalf("session stop: %v", r)
	}
	dir := filepath.Join(w.auditRoot(), id)
	patches, _ := filepath.Glob(filepath.Join(dir, "fsdiff-*.patch"))
	var stored int64
	for _, p := range patches {
		if fi, err := os.Stat(p); err == nil {
			stored += fi.Size()
		}
	}
	var notStored, diffs int
	for _, rec := range sessionEvents(t, w, id) {
		if rec.Type != event.FSDiff {
			continue
		}
		diffs++
		var d audit.FSDiff
		if err := rec.DecodeBody(&d); err != nil {
			t.Fatal(err)
		}
		if d.Gap != nil {
			notStored += d.Gap.PatchNotStored
		}
	}
	t.Logf("%d fs.diff lines, %d patch files, %d bytes stored, %d not stored", diffs, len(patches), stored, notStored)
	if diffs < execs {
		t.Errorf("%d fs.diff lines for %d commands", diffs, execs)
	}
	if stored == 0 || stored > bound {
		t.Errorf("the session stored %d bytes of patches; want the first command's, at most limits.diff.patch_run (%d)", stored, bound)
	}
	if notStored < 30<<20 {
		t.Errorf("the log records %d bytes of patch not stored; want the later commands' rewrites (over 30 MiB)", notStored)
	}
}

// TestContainerDiffBounded: TestRedDiffBounded on docker and containerd, whose
// workspaces cordon diffs on the host as it does bwrap's.
func TestContainerDiffBounded(t *testing.T) {
	forEachContainerBackend(t, func(t *testing.T, _ string) { TestRedDiffBounded(t) })
}
