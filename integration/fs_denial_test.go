package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDenialsHoldAgainstRenames: a denied path's directories are mount points, so
// renaming one fails and the secret stays masked in this run and the next.
func TestDenialsHoldAgainstRenames(t *testing.T) {
	w := newWorld(t)
	mustWrite(t, filepath.Join(w.ws, "secrets", "key.pem"), "TOPSECRET\n")
	mustWrite(t, filepath.Join(w.ws, ".github", "workflows", "ci.yml"), "on: push\n")
	w.contract("version: 1\nfilesystem:\n  deny_read: [secrets/key.pem]\n  deny_write: [.git, .github/workflows]\n")
	r := w.sh("mv secrets s2 2>&1; echo mv=$?; mv .github x 2>&1; echo mvgh=$?; mkdir -p .github/workflows; echo evil > .github/workflows/evil.yml; echo wf=$?")
	for _, bad := range []string{"mv=0", "mvgh=0", "wf=0"} {
		if strings.Contains(r.stdout, bad) {
			t.Fatalf("a denial moved or was bypassed (%s): %v", bad, r)
		}
	}
	r = w.sh("cat secrets/key.pem s2/key.pem 2>&1")
	if strings.Contains(r.stdout, "TOPSECRET") {
		t.Fatalf("the secret was read: %v", r)
	}
	if _, err := os.Stat(filepath.Join(w.ws, ".github", "workflows", "evil.yml")); err == nil {
		t.Fatal("a workflow was planted")
	}
}

// TestDenialThroughALinkRefused: a denied path reached through a symbolic link in the
// workspace (a .git link to a repository elsewhere) could be replaced by the sandbox
// with its own (a config whose fsmonitor host git runs): cordon refuses the run.
func TestDenialThroughALinkRefused(t *testing.T) {
	w := newWorld(t)
	repo := filepath.Join(t.TempDir(), "repo")
	mustMkdir(t, filepath.Join(repo, ".git"))
	if err := os.Symlink(filepath.Join(repo, ".git"), filepath.Join(w.ws, ".git")); err != nil {
		t.Fatal(err)
	}
	r := w.sh("rm .git; mkdir .git; echo pwned > .git/config")
	if r.code != 125 || !strings.Contains(r.stderr, "symbolic link") {
		t.Fatalf("want 125 naming the link, got %v", r)
	}
	if fi, err := os.Lstat(filepath.Join(w.ws, ".git")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the .git link was replaced: %v %v", fi, err)
	}
}

// TestColdHostileWorkspaceNamesUnderADenial: a workspace's own directory names are
// hostile input, and a deny glob mounts at them (the stand-in, and the directories
// between the grant and it): a name with white space the kernel does not escape
// neither refuses the run nor unhides the file.
func TestColdHostileWorkspaceNamesUnderADenial(t *testing.T) {
	t.Run("bwrap", hostileWorkspaceNamesUnderADenial)
	t.Run("engines", func(t *testing.T) {
		forEachContainerBackend(t, func(t *testing.T, _ string) { hostileWorkspaceNamesUnderADenial(t) })
	})
}

func hostileWorkspaceNamesUnderADenial(t *testing.T) {
	w := newWorld(t)
	dir := filepath.Join(w.ws, "a\u00a0b\rc")
	mustWrite(t, filepath.Join(dir, "k.pem"), "private key\n")
	w.contract("version: 1\nfilesystem:\n  deny_read: [\"**/*.pem\"]\n")
	r := w.sh("cat " + shellQuote(filepath.Join(dir, "k.pem")) + " 2>&1; echo x > " + shellQuote(filepath.Join(dir, "f")) + " && echo wrote")
	if r.code != 0 {
		t.Fatalf("the run was refused: %v", r)
	}
	if strings.Contains(r.stdout, "private key") {
		t.Fatalf("the denied file was read: %v", r)
	}
	assertContains(t, "the directory stays writable", r.stdout, "wrote")
}
