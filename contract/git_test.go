package contract

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// filesystem.git: the whole .git read-only by default, whatever deny_write says; under
// commit only the entries host git obeys, with commondir's placeholder naming itself.
func TestCompileGitModes(t *testing.T) {
	dir := realTempDir(t)
	for _, d := range []string{".git/objects/pack", ".git/objects/info", ".git/hooks", ".git/refs"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dotgit := filepath.Join(dir, ".git")
	for _, y := range []string{"version: 1\n", "version: 1\nfilesystem:\n  deny_write: [docs]\n", "version: 1\nfilesystem:\n  git: read-only\n"} {
		p, err := compileIn(t, dir, y)
		if err != nil {
			t.Fatal(err)
		}
		if m := mountAt(p, dotgit); m == nil || m.Path != dotgit || m.Access != ReadOnly {
			t.Errorf("%q: .git is %+v, want read-only", y, m)
		}
	}
	p, err := compileIn(t, dir, "version: 1\nfilesystem:\n  git: commit\n")
	if err != nil {
		t.Fatal(err)
	}
	if m := mountAt(p, dotgit); m == nil || m.Access != ReadWrite {
		t.Errorf(".git under git: commit: %+v, want writable (pinned in place)", m)
	}
	if m := mountAt(p, filepath.Join(dotgit, "refs")); m != nil {
		t.Errorf("refs under git: commit has a mount of its own: %+v", m)
	}
	for _, g := range gitPinned {
		m := mountAt(p, filepath.Join(dotgit, g.name))
		if m == nil || m.Path != filepath.Join(dotgit, g.name) || m.Access != ReadOnly {
			t.Errorf("%s under git: commit: %+v, want its own read-only mount", g.name, m)
			continue
		}
		if g.name == "commondir" && (m.Create != PlaceholderFile || m.Content != ".\n") {
			t.Errorf("commondir placeholder: %+v", m)
		}
	}
}

func TestCompileGitModeErrors(t *testing.T) {
	dir := realTempDir(t)
	if err := os.MkdirAll(filepath.Join(dir, ".git", "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	for y, want := range map[string]string{
		"version: 1\nfilesystem:\n  git: write\n":                               `3:8: filesystem.git: want read-only or commit, got "write"`,
		"version: 1\nfilesystem:\n  git: commit\n  deny_write: [.git]\n":        "4:16: filesystem.deny_write: .git conflicts with filesystem.git: commit",
		"version: 1\nfilesystem:\n  writable: [., .git/hooks]\n  git: commit\n": "is git's hooks, programs git runs, read-only under git: commit; to expose it, add a filesystem.widen",
	} {
		_, err := compileIn(t, dir, y)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", y, err, want)
		}
	}
}

// A push reads the workspace's packs where they are: a contract that lets the sandbox
// write them cannot have a push gate.
func TestPushGateNeedsReadOnlyPacks(t *testing.T) {
	dir := realTempDir(t)
	for _, d := range []string{".git/objects/pack", ".git/hooks"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	gate := "gates:\n  - {name: push, run: [git, push, https://example.com/r.git, HEAD:refs/heads/x], why: w}\n"
	for _, w := range []string{".git", ".git/objects/pack"} {
		y := "version: 1\nfilesystem:\n  widen:\n    - {path: " + w + ", access: write, why: gc}\n" + gate
		if _, err := compileIn(t, dir, y); err == nil || !strings.Contains(err.Error(), "the push reads the packs where they are") {
			t.Errorf("widen %s with a push gate: %v", w, err)
		}
	}
	if _, err := compileIn(t, dir, "version: 1\nfilesystem:\n  widen:\n    - {path: .git/hooks, access: write, why: hooks}\n"+gate); err != nil {
		t.Errorf("widening hooks is no concern of the push: %v", err)
	}
}
