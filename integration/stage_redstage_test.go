package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Further red-team attacks on cordon apply: what it lands must be what the diff
// showed, and nothing outside the workspace or in a host-executed path.

// TestRedStageGitHooks: a staged run writes an executable hook and edits .git/config
// of the workspace's repository. Whatever apply does, the host's repository must not
// end up running the sandbox's code (a hook or a config alias/fsmonitor).
func TestRedStageGitHooks(t *testing.T) {
	w := newStageWorld(t)
	if out, err := exec.Command("git", "init", "-q", w.ws).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	cfg, _ := os.ReadFile(filepath.Join(w.ws, ".git", "config"))
	r := w.cordon("", "run", "--stage", "--", "sh", "-c",
		`printf '#!/bin/sh\necho pwned\n' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; printf '[core]\n\tfsmonitor = touch /tmp/pwned\n' >> .git/config; echo ok > ok.txt`)
	m := stagedRunID.FindStringSubmatch(r.stderr)
	if m == nil {
		t.Logf("the staged run refused the write, as it may: %v", r)
		return
	}
	a := w.cordon("", "apply", "--force", m[1])
	t.Logf("apply: %v", a)
	assertAbsent(t, filepath.Join(w.ws, ".git", "hooks", "pre-commit"))
	if now, _ := os.ReadFile(filepath.Join(w.ws, ".git", "config")); string(now) != string(cfg) {
		t.Fatalf("apply landed the sandbox's .git/config:\n%s", now)
	}
	w.verify(m[1])
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

// TestRedStageGitFile: a staged run plants sub/.git as a gitfile pointing at a
// repository it made under another name, whose config runs a command. After apply,
// git on the host in sub must not run it (as after a direct run).
func TestRedStageGitFile(t *testing.T) {
	w := newStageWorld(t)
	mark := filepath.Join(t.TempDir(), "pwned")
	id := w.stage(`mkdir -p evil/objects evil/refs/heads sub; printf 'ref: refs/heads/m\n' > evil/HEAD; printf '[core]\n\trepositoryformatversion = 0\n\tfsmonitor = "touch ` + mark + `; false"\n' > evil/config; echo 'gitdir: ../evil' > sub/.git; echo s > sub/s`)
	r := w.cordon("", "apply", id)
	t.Logf("apply: %v", r)
	cmd := exec.Command("git", "status")
	cmd.Dir = filepath.Join(w.ws, "sub")
	cmd.Env = append(os.Environ(), "GIT_CEILING_DIRECTORIES="+filepath.Dir(w.ws))
	out, _ := cmd.CombinedOutput()
	t.Logf("git status in sub: %s", out)
	assertAbsent(t, mark)
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
