package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Red-team tests of staged runs: each is an attack on cordon apply (which lands the
// sandbox's change set as root) or on the log it extends, and asserts it fails.

// upper is the staged run's upper directory, where a hostile change set is planted.
func (w *stageWorld) upper(id string) string { return filepath.Join(w.stageDir(id), "upper") }

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

// TestStageRedQuarantineNameEscaped: a repository the staged run made under a name
// holding terminal escapes: apply's quarantine notice must not print them raw.
func TestStageRedQuarantineNameEscaped(t *testing.T) {
	w := newStageWorld(t)
	id := w.stage(`d=$(printf 'x\033]0;PWNED\007y'); mkdir -p "$d/.git" && echo 'ref: refs/heads/m' > "$d/.git/HEAD"; mkdir "$d/c" && echo 'version: 1' > "$d/c/cordon.yaml"`)
	r := w.cordon("", "apply", id)
	if r.code != 0 {
		t.Fatalf("apply: %v", r)
	}
	if strings.ContainsAny(r.stderr+r.stdout, "\033\007") {
		t.Fatalf("apply printed a sandbox-chosen escape sequence raw: %q", r.stderr)
	}
	assertContains(t, "apply's report", r.stderr, "renamed")
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

// TestStageRedHostileNamesInLog: names with newlines land as they are named, are
// printed escaped, and the log still verifies with them.
func TestStageRedHostileNamesInLog(t *testing.T) {
	w := newStageWorld(t)
	id := w.stage(`n=$(printf 'a\nfake: \033[31mline'); echo x > "$n"; mkfifo "$n.fifo"`)
	r := w.cordon("", "apply", id)
	if r.code != 0 {
		t.Fatalf("apply: %v", r)
	}
	if strings.ContainsAny(r.stderr+r.stdout, "\033") || strings.Contains(r.stderr, "\nfake:") {
		t.Fatalf("a hostile name reached the terminal raw: %q", r.stderr)
	}
	w.verify(id)
	for _, args := range [][]string{{"audit", "show", id}, {"audit", "show", "--diff", id}} {
		if show := w.cordon("", args...); strings.ContainsAny(show.stdout+show.stderr, "\033") {
			t.Errorf("%v printed a hostile name raw: %q", args, show.stdout)
		}
	}
	if _, err := os.Lstat(filepath.Join(w.ws, "a\nfake: \033[31mline")); err != nil {
		t.Errorf("the file did not land under its name: %v", err)
	}
}

// TestStageRedLogTailTruncated: the stage.apply line is the log's evidence that the
// workspace changed after the run. Cutting it off must not leave a log that verifies
// as intact.
func TestStageRedLogTailTruncated(t *testing.T) {
	w := newStageWorld(t)
	id := w.stage(`echo two > a.txt`)
	if r := w.cordon("", "apply", id); r.code != 0 {
		t.Fatalf("apply: %v", r)
	}
	p := filepath.Join(w.audit, id, "events.jsonl")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSuffix(string(data), "\n"), "\n")
	last := lines[len(lines)-1]
	if !strings.Contains(last, `"type":"stage.apply"`) {
		t.Fatalf("the last line is not stage.apply: %s", last)
	}
	if err := os.WriteFile(p, []byte(strings.Join(lines[:len(lines)-1], "")), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := w.cordon("", "audit", "verify", id); r.code == 0 {
		t.Fatalf("a log with its stage.apply cut off verifies: %v", r)
	}
}

// TestStageRedLogPartialApplyCut: the line of a partial apply cut off, the stage
// still there: the log verifies (the stage waits), but apply refuses to extend a log
// that no longer says what was landed.
func TestStageRedLogPartialApplyCut(t *testing.T) {
	w := newStageWorld(t)
	id := w.stage(`echo two > a.txt; echo new > c.txt`)
	p := filepath.Join(w.audit, id, "events.jsonl")
	sealed, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if r := w.cordon("", "apply", id, "c.txt"); r.code != 0 {
		t.Fatalf("apply c.txt: %v", r)
	}
	if err := os.WriteFile(p, sealed, 0o600); err != nil {
		t.Fatal(err)
	}
	r := w.cordon("", "apply", id)
	if r.code == 0 {
		t.Fatalf("apply extended a log cut back past a partial apply: %v", r)
	}
	if w.read("a.txt") != "one\n" {
		t.Errorf("apply landed on a log that lost a line: %q", w.read("a.txt"))
	}
	assertContains(t, "apply's refusal", r.stderr, "cut off")
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

// TestStageRedGitCommitMode: under filesystem.git: commit the workspace's .git is
// writable but for what git on the host obeys. A staged commit lands; a hostile
// change set that replaces .git with a pointer file, empties it (opaque), deletes a
// pinned entry or plants a hook lands none of that.
func TestStageRedGitCommitMode(t *testing.T) {
	for name, plant := range map[string]func(t *testing.T, upper string){
		"pointer file": func(t *testing.T, upper string) {
			must(t, os.RemoveAll(filepath.Join(upper, ".git")))
			must(t, os.WriteFile(filepath.Join(upper, ".git"), []byte("gitdir: /tmp/evil\n"), 0o644))
		},
		"hook": func(t *testing.T, upper string) {
			mustWrite(t, filepath.Join(upper, ".git", "hooks", "pre-commit"), "#!/bin/sh\necho pwned\n")
		},
		"config whiteout": func(t *testing.T, upper string) {
			if out, err := exec.Command("mknod", filepath.Join(upper, ".git", "config"), "c", "0", "0").CombinedOutput(); err != nil {
				t.Fatalf("mknod: %v: %s", err, out)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			w := newStageWorld(t)
			w.gitRepo()
			w.contract("version: 1\nfilesystem:\n  git: commit\n")
			config, _ := os.ReadFile(filepath.Join(w.ws, ".git", "config"))
			id := w.stage(`echo more >> main.go; git -c user.name=a -c user.email=a@b commit -qam second`)
			if _, err := os.Stat(filepath.Join(w.upper(id), ".git")); err != nil {
				t.Fatalf("the staged commit wrote nothing in .git: %v", err)
			}
			plant(t, w.upper(id))
			r := w.cordon("", "apply", "--force", id)
			got, _ := os.ReadFile(filepath.Join(w.ws, ".git", "config"))
			if string(got) != string(config) {
				t.Fatalf("apply changed .git/config: %q (%v)", got, r)
			}
			assertAbsent(t, filepath.Join(w.ws, ".git", "hooks", "pre-commit"))
			if fi, err := os.Lstat(filepath.Join(w.ws, ".git")); err != nil || !fi.IsDir() {
				t.Fatalf(".git is no longer a directory: %v", err)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
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
