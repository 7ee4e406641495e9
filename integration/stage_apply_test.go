package integration

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cordonhq/cordon/internal/testutil"
)

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

// TestStageRedFileOverDirHidingProtected: a staged regular file (or link) where the
// workspace holds a directory replaces the whole directory; one holding a path the
// contract protects must be refused, as a whiteout or an opaque directory there is.
func TestStageRedFileOverDirHidingProtected(t *testing.T) {
	for _, kind := range []string{"file", "symlink"} {
		t.Run(kind, func(t *testing.T) {
			w := newStageWorld(t)
			mustWrite(t, filepath.Join(w.ws, "ci", "workflows", "deploy.yml"), "on: push\n")
			w.contract("version: 1\nfilesystem:\n  deny_write: [ci/workflows]\n")
			id := w.stage(`echo ok > ok.txt`)
			p := filepath.Join(w.upper(id), "ci")
			var err error
			if kind == "file" {
				err = os.WriteFile(p, []byte("flat\n"), 0o644)
			} else {
				err = os.Symlink("elsewhere", p)
			}
			if err != nil {
				t.Fatal(err)
			}
			r := w.cordon("", "apply", "--force", id)
			if w.read("ci/workflows/deploy.yml") != "on: push\n" {
				t.Fatalf("apply replaced a directory holding a protected path (%v)", r)
			}
			assertContains(t, "apply's report", r.stderr, "not applied: ci")
		})
	}
}

// TestStageRedDeleteLosesHostEditBelow: the staged run removed a directory; the host
// then edited a file deeper inside it (an in-place write changes neither parent's
// ctime). Apply must see the conflict rather than delete the host's edit.
func TestStageRedDeleteLosesHostEditBelow(t *testing.T) {
	for name, script := range map[string]string{"whiteout": `rm -r d`, "opaque": `rm -r d; mkdir d; echo y > d/y`} {
		t.Run(name, func(t *testing.T) {
			w := newStageWorld(t)
			mustWrite(t, filepath.Join(w.ws, "d", "sub", "f"), "old\n")
			id := w.stage(script)
			f, err := os.OpenFile(filepath.Join(w.ws, "d", "sub", "f"), os.O_WRONLY|os.O_TRUNC, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = f.WriteString("edited on the host after the run\n")
			f.Close()
			r := w.cordon("", "apply", id)
			if got := w.read("d/sub/f"); got != "edited on the host after the run\n" {
				t.Fatalf("apply deleted a file the host changed after the run, without a conflict: %q (%v)", got, r)
			}
			if r.code != 1 {
				t.Errorf("want a conflict (exit 1), got %v", r)
			}
		})
	}
}

// TestStageRedSymlinkThenBelow: a staged link to outside, then (after the run)
// entries below that name planted in the stage by hand: apply writes below the
// workspace only.
func TestStageRedSymlinkThenBelow(t *testing.T) {
	w := newStageWorld(t)
	outside := t.TempDir()
	id := w.stage(`ln -s ` + outside + ` l; mkdir m; echo m > m/x`)
	// The change set now lands l (a link) and m/x; make the workspace's m a link to
	// outside too (a concurrent direct run), and force.
	if err := os.Symlink(outside, filepath.Join(w.ws, "m")); err != nil {
		t.Fatal(err)
	}
	r := w.cordon("", "apply", "--force", id)
	if entries, _ := os.ReadDir(outside); len(entries) > 0 {
		t.Fatalf("apply wrote outside the workspace: %v (%v)", entries, r)
	}
	if target, err := os.Readlink(filepath.Join(w.ws, "l")); err != nil || target != outside {
		t.Errorf("the staged link did not land as a link: %q %v", target, err)
	}
}

// TestStageRedSpecialAndLinkedEntries: a FIFO in the change set (which would block a
// reader) is refused, not opened; a hard link to a host file outside the stage lands
// nothing of it (apply reads the stage as root).
func TestStageRedSpecialAndLinkedEntries(t *testing.T) {
	w := newStageWorld(t)
	id := w.stage(`mkfifo fifo; echo ok > ok.txt`)
	if _, err := os.Lstat(filepath.Join(w.upper(id), "fifo")); err != nil {
		t.Fatalf("the sandbox's fifo is not staged: %v", err)
	}
	r := w.cordon("", "apply", id)
	if r.code != 0 {
		t.Fatalf("apply: %v", r)
	}
	assertAbsent(t, filepath.Join(w.ws, "fifo"))
	assertContains(t, "apply's report", r.stderr, "not applied: fifo")
	if w.read("ok.txt") != "ok\n" {
		t.Errorf("ok.txt = %q", w.read("ok.txt"))
	}
}

// TestStageRedNoSetID: set-id and sticky bits the sandbox put on staged files and
// directories never land (apply runs as root).
func TestStageRedNoSetID(t *testing.T) {
	w := newStageWorld(t)
	id := w.stage(`echo x > suid; chmod 6755 suid 2>/dev/null; mkdir sg; chmod 3777 sg 2>/dev/null; echo y > a.txt`)
	// The sandbox cannot set them (seccomp); a hostile change set has them anyway.
	for p, m := range map[string]os.FileMode{"suid": 0o755 | os.ModeSetuid | os.ModeSetgid, "sg": 0o777 | os.ModeSetgid | os.ModeSticky, "a.txt": 0o755 | os.ModeSetuid} {
		if err := os.Chmod(filepath.Join(w.upper(id), p), m); err != nil {
			t.Fatal(err)
		}
	}
	if r := w.cordon("", "apply", id); r.code != 0 {
		t.Fatalf("apply: %v", r)
	}
	for _, p := range []string{"suid", "sg", "a.txt"} {
		fi, err := os.Lstat(filepath.Join(w.ws, p))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode()&(os.ModeSetuid|os.ModeSetgid|os.ModeSticky) != 0 {
			t.Errorf("%s landed with %v", p, fi.Mode())
		}
	}
}

// TestStageRedSparseFileAmplified: a file of holes costs the sandbox nothing in the
// stage; apply (as root, which may use the blocks reserved for it) must not write it
// out as data.
func TestStageRedSparseFileAmplified(t *testing.T) {
	w := newStageWorld(t)
	id := w.stage(`truncate -s 1G holes; echo end >> holes`)
	if r := w.cordon("", "apply", id); r.code != 0 {
		t.Fatalf("apply: %v", r)
	}
	fi, err := os.Lstat(filepath.Join(w.ws, "holes"))
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Size() != 1<<30+4 {
		t.Errorf("size %d", fi.Size())
	}
	if used := st.Blocks * 512; used > 1<<20 {
		t.Fatalf("apply wrote a sparse file's holes out: %d bytes used for %d", used, fi.Size())
	}
}

// TestStageRedApplyDiscardRace: apply and discard at once: one of them wins, the
// other says so, and the log holds one line of what became of the stage.
func TestStageRedApplyDiscardRace(t *testing.T) {
	w := newStageWorld(t)
	id := w.stage(stagedEdits)
	done := make(chan result, 2)
	for _, args := range [][]string{{"apply", id}, {"discard", id}} {
		go func() { done <- w.cordon("", args...) }()
	}
	a, b := <-done, <-done
	if (a.code == 0) == (b.code == 0) {
		t.Fatalf("want exactly one of apply and discard to succeed:\n%v\n%v", a, b)
	}
	w.verify(id)
	events, _ := os.ReadFile(filepath.Join(w.audit, id, "events.jsonl"))
	if n := strings.Count(string(events), `"type":"stage.`); n != 1 {
		t.Errorf("want one stage.* line, got %d", n)
	}
}

// TestRedStagePathOutside: path arguments naming something outside the workspace
// (../x, an absolute path) select nothing and land nothing there.
func TestRedStagePathOutside(t *testing.T) {
	w := newStageWorld(t)
	id := w.stage(`echo two > a.txt`)
	outside := filepath.Join(filepath.Dir(w.ws), "a.txt")
	for _, arg := range []string{"../a.txt", outside, "d/../../a.txt"} {
		r := w.cordon("", "apply", id, arg)
		if r.code == 0 {
			t.Errorf("apply %s %s: want a refusal, got %v", id, arg, r)
		}
		assertAbsent(t, outside)
	}
	if w.read("a.txt") != "one\n" {
		t.Fatalf("a path outside the workspace applied a.txt: %q", w.read("a.txt"))
	}
	w.verify(id)
}

// TestRedStageHostFileLink: after the staged run edited a.txt, the host (or a
// concurrent direct run) replaced a.txt by a link to a file outside the workspace.
// apply --force replaces the link; it never writes through it.
func TestRedStageHostFileLink(t *testing.T) {
	w := newStageWorld(t)
	id := w.stage(`echo staged > a.txt`)
	outside := filepath.Join(t.TempDir(), "victim")
	mustWrite(t, outside, "victim\n")
	if err := os.Remove(filepath.Join(w.ws, "a.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(w.ws, "a.txt")); err != nil {
		t.Fatal(err)
	}
	if r := w.cordon("", "apply", id); r.code != 1 {
		t.Errorf("apply over a host-made link: want a conflict (exit 1), got %v", r)
	}
	r := w.cordon("", "apply", "--force", id)
	if got, _ := os.ReadFile(outside); string(got) != "victim\n" {
		t.Fatalf("apply --force wrote through a link to outside the workspace: %q (%v)", got, r)
	}
	if fi, err := os.Lstat(filepath.Join(w.ws, "a.txt")); err != nil || !fi.Mode().IsRegular() || w.read("a.txt") != "staged\n" {
		t.Fatalf("a.txt should be the staged file: %v %v %q", fi, err, w.read("a.txt"))
	}
	w.verify(id)
}

// TestRedStageTypeChange: the sandbox replaces a workspace file by a directory (and
// a directory by a link pointing out of the workspace). Apply lands exactly that,
// the logged diff shows both, and apply writes nothing through the link.
func TestRedStageTypeChange(t *testing.T) {
	w := newStageWorld(t)
	outside := t.TempDir()
	id := w.stage(`rm a.txt; mkdir a.txt; echo inner > a.txt/x; rm -r d; ln -s ` + outside + ` d`)
	show := w.cordon("", "audit", "show", "--diff", id)
	for _, want := range []string{"a.txt/x", "+inner", "-one", "d/x"} {
		assertContains(t, "the logged diff", show.stdout, want)
	}
	if r := w.cordon("", "apply", id); r.code != 0 {
		t.Fatalf("apply: %v", r)
	}
	if w.read("a.txt/x") != "inner\n" {
		t.Fatalf("a.txt/x = %q", w.read("a.txt/x"))
	}
	if fi, err := os.Lstat(filepath.Join(w.ws, "d")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("d should be the staged link: %v %v", fi, err)
	}
	if names, _ := os.ReadDir(outside); len(names) != 0 {
		t.Fatalf("apply wrote through the staged link: %v", names)
	}
	w.verify(id)
}

// TestRedStageWhiteoutLookalike: a file named like an aufs whiteout (.wh.a.txt) and a
// character device 0:0 the sandbox tries to mknod: what apply lands (or deletes) is in
// the logged diff, and a.txt is not deleted.
func TestRedStageWhiteoutLookalike(t *testing.T) {
	w := newStageWorld(t)
	id := w.stage(`echo w > .wh.a.txt; echo w > .wh..wh..opq; mknod b.txt c 0 0 2>/dev/null; true`)
	r := w.cordon("", "apply", id)
	if r.code != 0 {
		t.Fatalf("apply: %v", r)
	}
	if w.read("a.txt") != "one\n" {
		t.Fatalf("a whiteout-named file removed a.txt: %q", w.read("a.txt"))
	}
	if w.read(".wh.a.txt") != "w\n" || w.read(".wh..wh..opq") != "w\n" {
		t.Errorf("whiteout-named files did not land as files: %q %q", w.read(".wh.a.txt"), w.read(".wh..wh..opq"))
	}
	show := w.cordon("", "audit", "show", "--diff", id)
	for _, name := range []string{".wh.a.txt", ".wh..wh..opq"} {
		assertContains(t, "the logged diff", show.stdout, name)
	}
	if w.read("b.txt") != "keep\n" {
		// A 0:0 device the sandbox made is a real deletion: the diff must show it.
		assertContains(t, "the logged diff (b.txt deleted)", show.stdout, "b.txt")
	}
	w.verify(id)
}

// TestRedStageOverlayXattrs: the sandbox tries to set overlay's own attributes
// (opaque on d, a redirect on a new directory) through its view. If any took, apply
// would delete d/x or land content the diff never showed; the diff and the
// workspace after apply must agree on d/x.
func TestRedStageOverlayXattrs(t *testing.T) {
	w := newStageWorld(t)
	id := w.stage(`echo k > d/k; mkdir e; for n in trusted.overlay.opaque user.overlay.opaque; do python3 -c "import os,sys; os.setxattr('d', sys.argv[1], b'y')" $n 2>/dev/null; done; python3 -c "import os; os.setxattr('e', 'trusted.overlay.redirect', b'/d')" 2>/dev/null; true`)
	show := w.cordon("", "audit", "show", "--diff", id)
	r := w.cordon("", "apply", id)
	t.Logf("apply: %v", r)
	if w.read("d/x") != "x\n" {
		assertContains(t, "the logged diff (d/x removed)", show.stdout, "-x")
	}
	if names, _ := os.ReadDir(filepath.Join(w.ws, "e")); len(names) != 0 {
		t.Fatalf("a redirect landed entries the diff did not show: %v\n%s", names, show.stdout)
	}
	w.verify(id)
}

// TestRedStageDeepTree: a staged run makes a tree deeper than PATH_MAX (relative
// mkdir/cd), with a file at the bottom and an edit of a.txt. Either the change set is
// refused whole, or what apply lands is in the logged diff: never a landed path the
// diff did not show.
func TestRedStageDeepTree(t *testing.T) {
	w := newStageWorld(t)
	r := w.cordon("", "run", "--stage", "--", "sh", "-c",
		`echo two > a.txt; i=0; while [ $i -lt 1100 ]; do mkdir dddd && cd dddd || exit 3; i=$((i+1)); done; echo deep > bottom`)
	t.Logf("staged run: %v", r)
	m := stagedRunID.FindStringSubmatch(r.stderr)
	if m == nil {
		// Refused whole: nothing landed, the run's log verifies and its change set
		// can be discarded, leaving nothing behind.
		if w.read("a.txt") != "one\n" {
			t.Fatalf("a refused change set landed a.txt: %q", w.read("a.txt"))
		}
		logs, _ := filepath.Glob(filepath.Join(w.audit, "*", "events.jsonl"))
		for _, l := range logs {
			w.verify(filepath.Base(filepath.Dir(l)))
		}
		ids, _ := filepath.Glob(filepath.Join(w.audit, "*", "stage"))
		for _, st := range ids {
			id := filepath.Base(filepath.Dir(st))
			t.Logf("discard: %v", w.cordon("", "discard", id))
			w.verify(id)
			assertAbsent(t, st)
		}
		return
	}
	id := m[1]
	show := w.cordon("", "audit", "show", "--diff", id)
	a := w.cordon("", "apply", id)
	t.Logf("apply: %v", a)
	if _, err := os.Lstat(filepath.Join(w.ws, "dddd")); err == nil {
		assertContains(t, "the logged diff", show.stdout, "bottom")
		assertContains(t, "the logged diff", show.stdout, "+deep")
	}
	if w.read("a.txt") == "two\n" {
		assertContains(t, "the logged diff", show.stdout, "+two")
	}
	w.verify(id)
}
