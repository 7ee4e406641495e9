//go:build unix

package paths

import (
	"context"
	"errors"
	"github.com/cordonhq/cordon/internal/testutil"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/cordonhq/cordon/internal/errdefs"
)

// The uids of the tests: "me" stands for the invoking user, "other" for another local
// user. Chowning needs root; as anyone else, me is the test's own uid and the
// cases that need another owner skip.
const otherUID = 64001

func me(t *testing.T) int { return os.Geteuid() }

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root to chown to another uid (CI=true: no skip)")
		}
		testutil.Require(t, false, "needs root to chown to another uid")
	}
}

// base is a private directory whose chain up to / the test's user may trust: a
// t.TempDir under the temporary directory (root-owned, sticky).
func base(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckDir(d, me(t)); err != nil {
		testutil.Require(t, false, "the temporary directory's own chain is not trusted here: "+err.Error())
	}
	return d
}

func mkdir(t *testing.T, p string, mode fs.FileMode, uid int) {
	t.Helper()
	if err := os.Mkdir(p, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // past the umask, sticky included
		t.Fatal(err)
	}
	if uid != me(t) {
		if err := os.Chown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
}

func wantUnsafe(t *testing.T, err error, name string) {
	t.Helper()
	if !errors.Is(err, ErrUnsafe) || !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("%s: got %v; want an ErrUnsafe refusal (exit 125)", name, err)
	}
	if errdefs.ExitCode(err) != errdefs.ExitCannotRun {
		t.Fatalf("%s: exit code %d; want %d", name, errdefs.ExitCode(err), errdefs.ExitCannotRun)
	}
}

// TestChainRefusals: each way another user could control a component of a chain is
// refused by CheckDir and by MakeDir, which then creates nothing below it.
func TestChainRefusals(t *testing.T) {
	cases := []struct {
		name  string
		root  bool                                // needs root (chown)
		setup func(t *testing.T, b string) string // returns the directory asked for
	}{
		{"parent owned by another uid", true, func(t *testing.T, b string) string {
			mkdir(t, filepath.Join(b, "p"), 0o755, otherUID)
			return filepath.Join(b, "p", "runs")
		}},
		{"parent owned by another uid, target already ours", true, func(t *testing.T, b string) string {
			mkdir(t, filepath.Join(b, "p"), 0o777, otherUID)
			mkdir(t, filepath.Join(b, "p", "runs"), 0o700, me(t))
			return filepath.Join(b, "p", "runs")
		}},
		{"final component owned by another uid", true, func(t *testing.T, b string) string {
			mkdir(t, filepath.Join(b, "runs"), 0o700, otherUID)
			return filepath.Join(b, "runs")
		}},
		{"final component made first in a sticky directory", true, func(t *testing.T, b string) string {
			mkdir(t, filepath.Join(b, "tmp"), fs.ModeSticky|0o777, 0)
			mkdir(t, filepath.Join(b, "tmp", "cordon-1000"), 0o700, otherUID)
			return filepath.Join(b, "tmp", "cordon-1000", "runs")
		}},
		{"group-writable parent, not sticky", false, func(t *testing.T, b string) string {
			mkdir(t, filepath.Join(b, "g"), 0o775, me(t))
			return filepath.Join(b, "g", "runs")
		}},
		{"world-writable parent, not sticky", false, func(t *testing.T, b string) string {
			mkdir(t, filepath.Join(b, "w"), 0o777, me(t))
			return filepath.Join(b, "w", "runs")
		}},
		{"final component writable by others", false, func(t *testing.T, b string) string {
			mkdir(t, filepath.Join(b, "runs"), fs.ModeSticky|0o777, me(t))
			return filepath.Join(b, "runs")
		}},
		{"symbolic link as the final component", false, func(t *testing.T, b string) string {
			mkdir(t, filepath.Join(b, "real"), 0o700, me(t))
			if err := os.Symlink(filepath.Join(b, "real"), filepath.Join(b, "runs")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(b, "runs")
		}},
		{"symbolic link in the chain owned by another uid", true, func(t *testing.T, b string) string {
			mkdir(t, filepath.Join(b, "real"), 0o700, me(t))
			if err := os.Symlink(filepath.Join(b, "real"), filepath.Join(b, "link")); err != nil {
				t.Fatal(err)
			}
			if err := os.Lchown(filepath.Join(b, "link"), otherUID, otherUID); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(b, "link", "runs")
		}},
		{"symbolic link in the chain to a directory another uid owns", true, func(t *testing.T, b string) string {
			mkdir(t, filepath.Join(b, "theirs"), 0o755, otherUID)
			if err := os.Symlink(filepath.Join(b, "theirs"), filepath.Join(b, "link")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(b, "link", "runs")
		}},
		{"a file where a directory should be", false, func(t *testing.T, b string) string {
			if err := os.WriteFile(filepath.Join(b, "f"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(b, "f")
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.root {
				needRoot(t)
			}
			b := base(t)
			dir := c.setup(t, b)
			_, statErr := os.Lstat(dir)
			err := CheckDir(dir, me(t))
			if statErr == nil {
				wantUnsafe(t, err, "CheckDir")
			} else if err == nil {
				t.Fatalf("CheckDir accepted missing %s", dir)
			}
			wantUnsafe(t, MakeDir(dir, me(t)), "MakeDir")
			if statErr != nil {
				if _, err := os.Lstat(dir); err == nil {
					t.Errorf("MakeDir refused but created %s", dir)
				}
			}
		})
	}
}

// TestChainAccepts: a private directory under a sticky one, and under a symbolic link
// root owns, is made and accepted; a missing one is ErrNotExist for CheckDir.
func TestChainAccepts(t *testing.T) {
	b := base(t)
	mkdir(t, filepath.Join(b, "tmp"), fs.ModeSticky|0o777, 0)
	dir := filepath.Join(b, "tmp", "cordon-"+strconv.Itoa(me(t)), "runs")
	if err := CheckDir(dir, me(t)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("CheckDir of a missing directory: got %v; want ErrNotExist", err)
	}
	if err := MakeDir(dir, me(t)); err != nil {
		t.Fatal(err)
	}
	if err := CheckDir(dir, me(t)); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(dir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("made %v (%v); want mode 0700", st.Mode(), err)
	}
	if os.Geteuid() == 0 { // a root-owned link is followed
		if err := os.Symlink(filepath.Join(b, "tmp"), filepath.Join(b, "link")); err != nil {
			t.Fatal(err)
		}
		if err := CheckDir(filepath.Join(b, "link", "cordon-"+strconv.Itoa(me(t)), "runs"), me(t)); err != nil {
			t.Fatalf("through a root-owned link: %v", err)
		}
	}
}

// TestReadRecordRefusals: a record is trusted only as a regular file of its owner,
// writable by no one else, reached without a symbolic link.
func TestReadRecordRefusals(t *testing.T) {
	b := base(t)
	good := filepath.Join(b, "good.json")
	if err := os.WriteFile(good, []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadRecord(good, me(t)); err != nil {
		t.Fatalf("a good record: %v", err)
	}
	writable := filepath.Join(b, "w.json")
	if err := os.WriteFile(writable, []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(writable, 0o666)
	_, err := ReadRecord(writable, me(t))
	wantUnsafe(t, err, "writable by others")
	link := filepath.Join(b, "l.json")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	_, err = ReadRecord(link, me(t))
	wantUnsafe(t, err, "symbolic link")
	fifo := filepath.Join(b, "f.json")
	if out, err := exec.Command("mkfifo", "-m", "600", fifo).CombinedOutput(); err != nil {
		t.Fatalf("mkfifo: %v: %s", err, out)
	}
	_, err = ReadRecord(fifo, me(t))
	wantUnsafe(t, err, "fifo") // and returns: O_NONBLOCK
	_, err = ReadRecord(good, otherUID)
	wantUnsafe(t, err, "owned by another uid")
}

// TestDialSocketRefusesAnotherUID: a socket whose listener runs as another uid is
// refused after connecting, whatever the socket file's owner and mode say; the uid it
// expects is accepted.
func TestDialSocketRefusesAnotherUID(t *testing.T) {
	needRoot(t)
	// A directory the other uid can reach and bind in, holding a copy of this test
	// binary, which listens as that uid (TestHelperListen).
	dir, err := os.MkdirTemp("", "pathsock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	helper := filepath.Join(dir, "helper")
	if err := os.WriteFile(helper, self, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "s.sock")
	cmd := exec.Command(helper, "-test.run=^TestHelperListen$")
	cmd.Env = append(os.Environ(), "CORDON_PATHS_LISTEN="+sock)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: otherUID, Gid: otherUID}}
	cmd.Dir = "/"
	ready, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.ExtraFiles = []*os.File{w}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if _, err := ready.Read(make([]byte, 1)); err != nil {
		t.Fatalf("the helper listener did not start: %v", err)
	}
	for _, want := range []int{0, 64002} {
		c, err := DialSocket(context.Background(), sock, want)
		if c != nil {
			c.Close()
		}
		wantUnsafe(t, err, "a peer of uid "+strconv.Itoa(otherUID)+" for uid "+strconv.Itoa(want))
	}
	c, err := DialSocket(context.Background(), sock, otherUID)
	if err != nil {
		t.Fatalf("the peer's own uid refused: %v", err)
	}
	c.Close()
}

// TestHelperListen is TestDialSocketRefusesAnotherUID's listener, run as another uid.
func TestHelperListen(t *testing.T) {
	sock := os.Getenv("CORDON_PATHS_LISTEN")
	if sock == "" {
		return // not a test: a helper process, run with its environment set
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		os.Exit(3)
	}
	_, _ = os.NewFile(3, "ready").Write([]byte{1})
	for {
		c, err := ln.Accept()
		if err != nil {
			os.Exit(0)
		}
		c.Close()
	}
}
