package paths

import (
	"os"
	"path/filepath"
	"testing"
)

// Red team: ReadTrusted checked the directory chain of filepath.Dir(abs), which
// cleans "..", but opened abs as given, which the kernel resolves through whatever
// the components before a ".." are. With abs = B/open/x/../../trusted/f, the check
// was of B/trusted while the open went through B/open/x: a link anyone may put in
// place there leads the open elsewhere. Every caller cleans its path first
// (filepath.Abs, the server config's absPath), so this was held there; ReadTrusted
// now refuses a path that is not clean itself.
func TestRedTeamReadTrustedUncleanPath(t *testing.T) {
	b := base(t)
	trusted := filepath.Join(b, "trusted")
	mkdir(t, trusted, 0o700, me(t))
	if err := os.WriteFile(filepath.Join(trusted, "f"), []byte("checked\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Where the open really goes: the attacker's choice of a file the owner wrote.
	elsewhere := filepath.Join(b, "elsewhere")
	mkdir(t, elsewhere, 0o700, me(t))
	mkdir(t, filepath.Join(elsewhere, "a"), 0o700, me(t))
	mkdir(t, filepath.Join(elsewhere, "trusted"), 0o700, me(t))
	if err := os.WriteFile(filepath.Join(elsewhere, "trusted", "f"), []byte("chosen by another user\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(b, "open")
	mkdir(t, open, 0o777, me(t)) // anyone may put a link here
	if err := os.Symlink(filepath.Join(elsewhere, "a", "b"), filepath.Join(open, "x")); err != nil {
		t.Fatal(err)
	}
	mkdir(t, filepath.Join(elsewhere, "a", "b"), 0o700, me(t))

	abs := filepath.Join(b, "open") + "/x/../../trusted/f"
	data, err := ReadTrusted(abs, 100)
	if err == nil {
		t.Fatalf("ReadTrusted(%q) read %q: the check was of %s, the open went through %s", abs, data, trusted, open)
	}
	if _, err := CheckTrusted(abs); err == nil {
		t.Fatalf("CheckTrusted(%q) passed an unclean path", abs)
	}
}

// CheckTrusted is ReadTrusted without the read (for a file too large to read, such as
// an exec plugin's binary): the same file passes and fails.
func TestCheckTrusted(t *testing.T) {
	b := base(t)
	good := filepath.Join(b, "plugin")
	if err := os.WriteFile(good, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := CheckTrusted(good); err != nil {
		t.Fatalf("a trusted file: %v", err)
	}
	open := filepath.Join(b, "open")
	mkdir(t, open, 0o777, me(t))
	inOpen := filepath.Join(open, "plugin")
	if err := os.WriteFile(inOpen, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := CheckTrusted(inOpen)
	wantUnsafe(t, err, "a file in a directory others may write")
	writable := filepath.Join(b, "w")
	if err := os.WriteFile(writable, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(writable, 0o757)
	_, err = CheckTrusted(writable)
	wantUnsafe(t, err, "a file others may write")
	link := filepath.Join(b, "l")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	_, err = CheckTrusted(link)
	wantUnsafe(t, err, "a symbolic link")
	if _, err := CheckTrusted("plugin"); err == nil {
		t.Fatal("a relative path passed")
	}
}
