package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/testutil"
)

func TestWriteOutsideWorkspaceFails(t *testing.T) {
	w := newWorld(t)
	outside := filepath.Join(filepath.Dir(w.ws), "outside")
	mustMkdir(t, outside)
	r := w.sh("echo pwned > " + outside + "/f; echo write=$?; test -e " + outside + " && echo outside-visible; echo done")
	assertContains(t, "stdout", r.stdout, "done")
	if strings.Contains(r.stdout, "write=0\n") {
		t.Fatalf("write outside the workspace succeeded: %v", r)
	}
	// The directory is simply not in the sandbox: asked of the file system, not of the
	// shell's wording (dash, bash and busybox's sh each say it their own way).
	if strings.Contains(r.stdout, "outside-visible") {
		t.Errorf("want the write to fail because the path does not exist inside; got %v", r)
	}
	assertAbsent(t, filepath.Join(outside, "f"))
}

func TestWriteIntoGitFails(t *testing.T) {
	w := newWorld(t)
	mustWrite(t, filepath.Join(w.ws, ".git", "HEAD"), "ref: refs/heads/main\n")
	mustMkdir(t, filepath.Join(w.ws, ".git", "hooks"))
	r := w.sh("echo 'curl evil' > .git/hooks/pre-commit")
	if r.code == 0 {
		t.Fatalf("write into .git succeeded: %v", r)
	}
	assertContains(t, "stderr", r.stderr, "Read-only file system")
	assertAbsent(t, filepath.Join(w.ws, ".git", "hooks", "pre-commit"))
	// .git stays readable.
	r = w.sh("cat .git/HEAD")
	if r.code != 0 || !strings.Contains(r.stdout, "refs/heads/main") {
		t.Fatalf(".git must stay readable: %v", r)
	}
}

func TestCreatingGitInNonRepoFails(t *testing.T) {
	w := newWorld(t)
	// Planting a .git with a config that runs code on the host's next git command.
	r := w.sh("mkdir -p .git && echo '[core] fsmonitor = touch /tmp/pwned' > .git/config")
	if r.code == 0 {
		t.Fatalf("creating .git succeeded: %v", r)
	}
	assertContains(t, "stderr", r.stderr, "Read-only file system")
	assertAbsent(t, filepath.Join(w.ws, ".git")) // the placeholder is gone after the run
}

func TestWriteIntoEtcFails(t *testing.T) {
	w := newWorld(t)
	r := w.sh("echo x > /etc/cordon-pwned")
	if r.code == 0 {
		t.Fatalf("write into /etc succeeded: %v", r)
	}
	assertContains(t, "stderr", r.stderr, "Read-only file system")
	assertAbsent(t, "/etc/cordon-pwned")
}

func TestWorkspaceIsWritable(t *testing.T) {
	w := newWorld(t)
	r := w.sh("echo made > new.txt && mkdir -p sub/dir && echo deep > sub/dir/f")
	if r.code != 0 {
		t.Fatalf("writing the workspace failed: %v", r)
	}
	data, err := os.ReadFile(filepath.Join(w.ws, "sub", "dir", "f"))
	if err != nil || string(data) != "deep\n" {
		t.Fatalf("write did not reach the host workspace: %q %v", data, err)
	}
}

func TestReadShadowFails(t *testing.T) {
	w := newWorld(t)
	_, err := os.Stat("/etc/shadow")
	testutil.Require(t, err == nil, "a host /etc/shadow to attack")
	r := w.sh("cat /etc/shadow")
	if r.code == 0 {
		t.Fatalf("reading /etc/shadow succeeded: %v", r)
	}
	assertContains(t, "stderr", r.stderr, "Permission denied")
}

func TestReadCallerSSHKeyFails(t *testing.T) {
	w := newWorld(t)
	key := filepath.Join(w.home, ".ssh", "id_rsa")

	t.Run("default contract: home is empty", func(t *testing.T) {
		r := w.sh("cat " + key + "; ls -A " + w.home)
		assertContains(t, "stderr", r.stderr, "No such file or directory")
		if strings.Contains(r.stdout, "secret-key-material") || strings.Contains(r.stdout, "notes.txt") {
			t.Fatalf("the caller's home leaked: %v", r)
		}
	})
	t.Run("home readable: .ssh stays masked", func(t *testing.T) {
		w.contract("version: 1\nfilesystem:\n  readable: [\"@system\", \"~\"]\n")
		defer os.Remove(filepath.Join(w.ws, "cordon.yaml"))
		r := w.sh("cat notes.txt 2>/dev/null; cat " + w.home + "/notes.txt; cat " + key)
		assertContains(t, "stdout", r.stdout, "home notes")
		assertContains(t, "stderr", r.stderr, "Permission denied")
		if strings.Contains(r.stdout, "secret-key-material") {
			t.Fatalf("~/.ssh leaked: %v", r)
		}
	})
	t.Run("naming ~/.ssh is refused", func(t *testing.T) {
		w.contract("version: 1\nfilesystem:\n  readable: [\"~/.ssh\"]\n")
		defer os.Remove(filepath.Join(w.ws, "cordon.yaml"))
		r := w.cordon("", "check")
		if r.code != 1 {
			t.Fatalf("check: want exit 1, got %v", r)
		}
		assertContains(t, "check output", r.stdout, "cordon.yaml:3:14: filesystem.readable: ")
		assertContains(t, "check output", r.stdout, "a credential store; to expose it, add a filesystem.widen entry")
		r = w.sh("true")
		if r.code != 125 {
			t.Fatalf("run: want 125, got %v", r)
		}
	})
}

func TestDenyReadHidesFiles(t *testing.T) {
	w := newWorld(t)
	mustWrite(t, filepath.Join(w.ws, ".env"), "DB_PASSWORD=hunter2\n")
	w.contract("version: 1\nfilesystem:\n  deny_read: [.env, secrets/**]\n")
	// Read the file every way a command might: by name, through a copy, a link,
	// another path to it, and a search of the whole workspace. A masked file is
	// unreadable (bwrap, the container backends) or an empty directory (a Pod, which
	// never receives it): either way no read yields its content.
	r := w.sh(`cat .env; echo cat=$?; head -c 64 "$PWD/.env"; cp .env /tmp/c && cat /tmp/c; ` +
		`ln -s "$PWD/.env" /tmp/l && cat /tmp/l; grep -r hunter2 .; echo done`)
	if strings.Contains(r.stdout, "cat=0") || strings.Contains(r.stdout, "hunter2") {
		t.Fatalf("deny_read file was readable: %v", r)
	}
	assertContains(t, "stdout", r.stdout, "done")
	// A denied path that does not exist yet cannot be created either.
	r = w.sh("mkdir -p secrets && echo x > secrets/new")
	if r.code == 0 {
		t.Fatalf("creating a deny_read path succeeded: %v", r)
	}
	assertAbsent(t, filepath.Join(w.ws, "secrets"))
}

func TestSymlinkInWorkspaceCannotWidenAccess(t *testing.T) {
	w := newWorld(t)
	before, _ := os.ReadFile("/etc/passwd")
	if err := os.Symlink("/etc/passwd", filepath.Join(w.ws, "passwd-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(w.home, filepath.Join(w.ws, "home-link")); err != nil {
		t.Fatal(err)
	}
	r := w.sh("echo 'evil::0:0::/:/bin/sh' >> passwd-link")
	if r.code == 0 {
		t.Fatalf("write through a symlink to /etc/passwd succeeded: %v", r)
	}
	// The kernel refuses it: the read-only mount, or first (a container running as an
	// unprivileged host uid) root's file mode.
	if !strings.Contains(r.stderr, "Read-only file system") && !strings.Contains(r.stderr, "Permission denied") {
		t.Fatalf("want the kernel's refusal (EROFS or EACCES), got %v", r)
	}
	if after, _ := os.ReadFile("/etc/passwd"); string(after) != string(before) {
		t.Fatal("/etc/passwd changed")
	}
	// The link to the caller's home leads to the sandbox's empty private home.
	r = w.sh("echo pwned > home-link/pwned; ls -A home-link/; cat home-link/.ssh/id_rsa")
	if strings.Contains(r.stdout, "secret-key-material") || strings.Contains(r.stdout, "notes.txt") {
		t.Fatalf("the home symlink reached the caller's home: %v", r)
	}
	assertAbsent(t, filepath.Join(w.home, "pwned"))

	// A contract path that leaves the workspace through a symlink is refused.
	if err := os.Symlink("/etc", filepath.Join(w.ws, "build")); err != nil {
		t.Fatal(err)
	}
	w.contract("version: 1\nfilesystem:\n  writable: [\".\", build]\n")
	r = w.cordon("", "check")
	if r.code != 1 {
		t.Fatalf("check: want 1, got %v", r)
	}
	assertContains(t, "check", r.stdout, "outside the workspace through a symbolic link")
}

// TestContractNotWritable: the sandbox can neither rewrite nor create the contract a
// later run reads (the workspace's cordon.yaml, the -c file inside the workspace):
// one command would otherwise widen every run after it.
func TestContractNotWritable(t *testing.T) {
	w := newWorld(t)
	// No cordon.yaml yet: the built-in default contract, and none may be created.
	r := w.sh("echo 'version: 1' > cordon.yaml 2>&1; echo create=$?")
	if !strings.Contains(r.stdout, "create=") || strings.Contains(r.stdout, "create=0") {
		t.Fatalf("cordon.yaml could be created: %v", r)
	}
	if _, err := os.Stat(filepath.Join(w.ws, "cordon.yaml")); err == nil {
		if data, _ := os.ReadFile(filepath.Join(w.ws, "cordon.yaml")); len(data) > 0 {
			t.Fatalf("the sandbox wrote a contract: %q", data)
		}
	}
	w.contract("version: 1\n")
	r = w.sh("echo 'filesystem: {readable: [\"/\"]}' >> cordon.yaml 2>&1; echo append=$?; mv cordon.yaml x.yaml 2>&1; echo mv=$?")
	if strings.Contains(r.stdout, "append=0") || strings.Contains(r.stdout, "mv=0") || !strings.Contains(r.stdout, "mv=") {
		t.Fatalf("cordon.yaml could be changed or moved: %v", r)
	}
	ci := filepath.Join(w.ws, "ci", "contract.yaml")
	mustWrite(t, ci, "version: 1\nworkspace: ..\n")
	r = w.cordon("", "run", "-c", ci, "--", "sh", "-c", "echo x >> ci/contract.yaml; echo ci=$?")
	if !strings.Contains(r.stdout, "ci=") || strings.Contains(r.stdout, "ci=0") {
		t.Fatalf("the -c file in the workspace could be written: %v", r)
	}
	if data, _ := os.ReadFile(filepath.Join(w.ws, "cordon.yaml")); string(data) != "version: 1\n" {
		t.Fatalf("the contract changed: %q", data)
	}
}

// TestContractPlaceholderIsNoContract: while a session keeps a missing cordon.yaml
// from being created (an empty placeholder on the host), `cordon check` in the same
// workspace still sees no contract, not an empty one (a run there is refused: the
// workspace is the session's).
func TestContractPlaceholderIsNoContract(t *testing.T) {
	w := newWorld(t)
	w.startSession()
	if r := w.cordon("", "run", "--", "true"); r.code != 125 || !strings.Contains(r.stderr, "is in use") {
		t.Fatalf("a run beside a session: want refused, the workspace in use: %v", r)
	}
	if c := w.cordon("", "check"); c.code != 0 || !strings.Contains(c.stdout, "built-in default contract: valid") {
		t.Fatalf("check beside a session: %v", c)
	}
}
