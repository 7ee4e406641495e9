package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestStagedApplyQuarantinesRepositories: a git repository the staged run made lands
// disarmed, as a direct run's would.
func TestStagedApplyQuarantinesRepositories(t *testing.T) {
	w := newStageWorld(t)
	id := w.stage(`mkdir -p sub/.git && printf '[core]\n\tfsmonitor = evil\n' > sub/.git/config && echo 'ref: refs/heads/m' > sub/.git/HEAD`)
	r := w.cordon("", "apply", id)
	if r.code != 0 {
		t.Fatalf("apply: %v", r)
	}
	assertAbsent(t, filepath.Join(w.ws, "sub", ".git"))
	if _, err := os.Stat(filepath.Join(w.ws, "sub", ".git.cordon-quarantine", "config")); err != nil {
		t.Errorf("the repository did not land quarantined: %v", err)
	}
	w.verify(id)
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
