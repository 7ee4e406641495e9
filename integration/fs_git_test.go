package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/paths"
)

// hostGit runs git on the host in dir with no user or system configuration.
func hostGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=host", "-c", "user.email=host@example.com"}, args...)...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("host git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// sandboxGit is git as the tests run it in the sandbox: trusting the workspace
// whoever owns it. In a Pod the workspace's files belong to a uid the command's user
// namespace does not map (the overflow uid), and git would refuse the repository
// ("dubious ownership") before doing what a test asks of it: the tests are about
// what git may write, not whom it trusts. (safe.directory is obeyed from the command
// line only, never from the repository's own configuration.)
const sandboxGit = "git -c 'safe.directory=*'"

// gitRepo makes w.ws a git repository with one commit.
func (w *world) gitRepo() {
	w.t.Helper()
	mustWrite(w.t, filepath.Join(w.ws, "main.go"), "package main\n")
	hostGit(w.t, w.ws, "init", "-q", "-b", "main")
	hostGit(w.t, w.ws, "add", "main.go")
	hostGit(w.t, w.ws, "commit", "-qm", "first")
}

// TestGitCommitMode: under filesystem.git: commit the agent commits, branches and tags,
// and the host's git sees it; everything git on the host would run or obey (config,
// hooks, commondir, modules, alternates, packs) can be neither changed, created, nor
// moved out of the way.
func TestGitCommitMode(t *testing.T) {
	w := newWorld(t)
	w.gitRepo()
	config, _ := os.ReadFile(filepath.Join(w.ws, ".git", "config"))
	w.contract("version: 1\nfilesystem:\n  git: commit\n")
	g := sandboxGit + " -c user.name=agent -c user.email=agent@example.com"
	r := w.sh("echo change >> main.go; " + g + " commit -qam 'agent change' && echo commit=ok; " +
		g + " checkout -qb agent/work && echo branch=ok; " + g + " tag v1 && echo tag=ok; " + sandboxGit + " status --short; echo status=$?")
	for _, want := range []string{"commit=ok", "branch=ok", "tag=ok", "status=0"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("git under git: commit: want %s: %v", want, r)
		}
	}
	// The placeholders that keep protected files absent are nothing git shows: an
	// agent's `git add -A` would commit them.
	if strings.Contains(r.stdout, ".envrc") || strings.Contains(r.stdout, ".mcp.json") || strings.Contains(r.stdout, "lefthook") {
		t.Errorf("git status in the sandbox shows placeholders: %v", r)
	}
	if log := hostGit(t, w.ws, "log", "--format=%s", "agent/work"); !strings.Contains(log, "agent change") {
		t.Fatalf("the host's git does not see the agent's commit: %q", log)
	}
	// What the agent did to .git is in the log: refs, tags, HEAD (not the objects).
	show := w.cordon("", "audit", "show", "--diff", "last")
	for _, want := range []string{".git/refs/heads/agent/work", ".git/refs/tags/v1", ".git/HEAD"} {
		assertContains(t, "the log of a git: commit run", show.stdout, want)
	}
	if strings.Contains(show.stdout, ".git/objects/") {
		t.Errorf("the log lists objects: %s", show.stdout)
	}
	attacks := map[string]string{
		"config":     "echo '[core]fsmonitor=touch /tmp/pwned' >> .git/config",
		"hook":       "printf '#!/bin/sh\\nid\\n' > .git/hooks/post-checkout",
		"hooksmove":  "mv .git/hooks .git/h2 && mkdir .git/hooks",
		"commondir":  "mkdir evil; printf '../evil\\n' > .git/commondir",
		"rmcommon":   "rm -f .git/commondir && printf ../evil > .git/commondir",
		"modules":    "mkdir -p .git/modules/x && echo x > .git/modules/x/config",
		"alternates": "echo /srv > .git/objects/info/alternates",
		"pack":       "ln -s /etc/passwd .git/objects/pack/pack-0.pack",
		"gitmove":    "mv .git .git2",
		"objmove":    "mv .git/objects .git/o2",
		"remotes":    "mkdir -p .git/remotes && echo 'URL: /srv/x' > .git/remotes/origin",
		"worktrees":  "mkdir -p .git/worktrees/x",
		// The record that this index is the sandbox's: it must outlive the run.
		"unmark":   "rm -f .git/" + paths.GitWritten + " && ! test -e .git/" + paths.GitWritten,
		"markmove": "mv .git/" + paths.GitWritten + " .git/x",
		"markedit": "echo trusted > .git/" + paths.GitWritten,
	}
	var script strings.Builder
	for name, cmd := range attacks {
		script.WriteString("(" + cmd + ") 2>/dev/null && echo HOLE=" + name + "; ")
	}
	script.WriteString("echo done")
	r = w.sh(script.String())
	assertContains(t, "attacks ran", r.stdout, "done")
	if strings.Contains(r.stdout, "HOLE=") {
		t.Fatalf("git: commit let the sandbox change what host git obeys: %v", r)
	}
	if now, _ := os.ReadFile(filepath.Join(w.ws, ".git", "config")); string(now) != string(config) {
		t.Fatalf(".git/config changed:\n%s", now)
	}
	for _, p := range []string{"commondir", "modules", "worktrees", "remotes", "config.worktree", "hooks/post-checkout"} {
		assertAbsent(t, filepath.Join(w.ws, ".git", p)) // placeholders removed, nothing planted
	}
	if mark, err := os.ReadFile(filepath.Join(w.ws, ".git", paths.GitWritten)); err != nil || string(mark) != paths.GitWrittenContent {
		t.Fatalf("the record that a sandbox could write the index is gone or changed after the run: %q, %v", mark, err)
	}
	hostGit(t, w.ws, "status", "--short")
}

// TestGitReadOnlyByDefault: without filesystem.git the agent cannot commit, even when
// the contract lists its own deny_write (which no longer replaces the .git default).
func TestGitReadOnlyByDefault(t *testing.T) {
	w := newWorld(t)
	w.gitRepo()
	w.contract("version: 1\nfilesystem:\n  deny_write: [docs]\n")
	r := w.sh("echo change >> main.go; " + sandboxGit + " -c user.name=a -c user.email=a@b commit -qam x 2>&1; echo commit=$?; echo x > .git/hooks/pre-commit; echo hook=$?")
	if strings.Contains(r.stdout, "commit=0") || strings.Contains(r.stdout, "hook=0") {
		t.Fatalf("the .git was writable: %v", r)
	}
	// git failed because it could not write .git (its index lock), not earlier.
	assertContains(t, "git commit", r.stdout, "index.lock': Read-only file system")
	if log := hostGit(t, w.ws, "log", "--format=%s"); strings.Contains(log, "x\n") {
		t.Fatalf("a commit landed: %q", log)
	}
}

// TestChangedNestedRepositoryQuarantined: a nested repository that was there before (a
// clone under lib/, a submodule's pointer) is quarantined too when a command rewrites
// what git obeys in it: its config, or where the pointer leads.
func TestChangedNestedRepositoryQuarantined(t *testing.T) {
	w := newWorld(t)
	w.gitRepo()
	lib := filepath.Join(w.ws, "lib")
	mustMkdir(t, lib)
	hostGit(t, lib, "init", "-q")
	mustMkdir(t, filepath.Join(w.ws, ".git", "modules", "sm"))
	mustWrite(t, filepath.Join(w.ws, "sm", ".git"), "gitdir: ../.git/modules/sm\n")
	mustMkdir(t, filepath.Join(w.ws, "vendor"))
	hostGit(t, filepath.Join(w.ws, "vendor"), "init", "-q") // untouched: stays
	mustWrite(t, filepath.Join(w.ws, "deep", ".git", "modules", "sub", "config"), "[core]\n")
	mustWrite(t, filepath.Join(w.ws, "deep", ".git", "HEAD"), "ref: refs/heads/main\n")
	r := w.sh("printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' >> lib/.git/config && echo 'gitdir: ../elsewhere' > sm/.git && " +
		"printf '\\tfsmonitor = touch /tmp/pwned\\n' >> deep/.git/modules/sub/config && echo ok")
	assertContains(t, "ran", r.stdout, "ok")
	for _, q := range []string{"lib/.git", "sm/.git", "deep/.git"} {
		assertAbsent(t, filepath.Join(w.ws, q))
		if _, err := os.Lstat(filepath.Join(w.ws, q+".cordon-quarantine")); err != nil {
			t.Errorf("%s was not quarantined: %v\n%v", q, err, r)
		}
	}
	if _, err := os.Stat(filepath.Join(w.ws, "vendor", ".git")); err != nil {
		t.Errorf("an untouched nested repository was quarantined: %v", err)
	}
}

// TestBareRepositoryByLinksQuarantined: git takes a directory for a repository when its
// HEAD names a ref, whatever objects and refs are (links, files, or missing for now):
// such a HEAD is renamed however the rest is made.
func TestBareRepositoryByLinksQuarantined(t *testing.T) {
	w := newWorld(t)
	r := w.sh("mkdir -p src build/o build/r && printf 'ref: refs/heads/main\\n' > src/HEAD && ln -s ../build/o src/objects && ln -s ../build/r src/refs && " +
		"printf '[core]\\n\\tbare = false\\n\\tworktree = ..\\n\\tfsmonitor = touch /tmp/pwned\\n' > src/config && " +
		"mkdir -p t2 && touch t2/objects t2/refs && chmod +x t2/objects t2/refs && printf 'ref: refs/heads/x\\n' > t2/HEAD; " +
		"mkdir -p t3/objects t3/refs t4 && printf 'ABCDEF0123456789ABCDEF0123456789ABCDEF01\\n' > t3/HEAD && " +
		"printf 'abcdef0123456789abcdef0123456789abcdef01zz\\n' > t4/HEAD; echo ok")
	assertContains(t, "ran", r.stdout, "ok")
	for _, d := range []string{"src", "t2", "t3", "t4"} {
		assertAbsent(t, filepath.Join(w.ws, d, "HEAD"))
		if _, err := os.Lstat(filepath.Join(w.ws, d, "HEAD.cordon-quarantine")); err != nil {
			t.Errorf("%s/HEAD was not quarantined: %v\n%v", d, err, r)
		}
	}
}
