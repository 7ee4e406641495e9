package paths

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
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

// Red team: a path through /proc/PID/root. That link is root's (for a process of
// root's) and reads as "/", so the chain was checked as this host's own directories,
// while the kernel resolves it in the process's root and mount namespace: a
// container's, a sandbox's. A process in a mount namespace of its own mounts a tmpfs
// over a trusted directory and writes the file there: ReadTrusted read that file,
// having checked the host's. A path through /proc is never trusted now.
func TestRedTeamReadTrustedThroughProcRoot(t *testing.T) {
	needRoot(t)
	_, err := exec.LookPath("unshare")
	testutil.Require(t, err == nil, "unshare (util-linux) to make a mount namespace")
	b := base(t)
	dir := filepath.Join(b, "trusted")
	mkdir(t, dir, 0o700, me(t))
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("the host's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// In a mount namespace of its own: a tmpfs over dir, another f in it.
	ready := filepath.Join(b, "ready")
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c",
		fmt.Sprintf("mount -t tmpfs -o mode=0700 none %s && echo another > %s/f && chmod 0644 %s/f && touch %s && exec sleep 60", dir, dir, dir, ready))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the other mount namespace never got ready")
		}
	}
	abs := fmt.Sprintf("/proc/%d/root%s/f", cmd.Process.Pid, dir)
	data, err := ReadTrusted(abs, 100)
	if err == nil {
		t.Errorf("ReadTrusted(%s) read %q: the chain checked was this host's %s", abs, data, dir)
	}
	if _, err := CheckTrusted(abs); err == nil {
		t.Errorf("CheckTrusted(%s) passed", abs)
	}
	if err := CheckDir(filepath.Dir(abs), me(t)); err == nil {
		t.Errorf("CheckDir(%s) passed", filepath.Dir(abs))
	}
}
