package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
)

// TestRedFollowSocketAnsweredByAnotherUID (red team, issue 34 §6): audit follow -o
// unix:PATH checked only the owner of the socket file (stat by name), then dialled the
// name, and never asked who answered (SO_PEERCRED). Another local user who can rename
// a socket of its own over PATH between the two (a directory it can write) received
// the run's whole log. The rename race is stood in for here without a race: the other
// user's socket file is given to the caller (chown), so the file check passes and only
// a check of the peer can refuse it.
func TestRedFollowSocketAnsweredByAnotherUID(t *testing.T) {
	testutil.RequireRoot(t)
	const other = "64102"
	w := newWorld(t)
	w.contract("version: 1\n")
	if r := w.sh("echo ran"); r.code != 0 {
		t.Fatalf("run: %v", r)
	}
	dir, err := os.MkdirTemp("/var/tmp", "cordon-red-peer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 64102, 64102); err != nil {
		t.Fatal(err)
	}
	sock, got, ready := filepath.Join(dir, "col.sock"), filepath.Join(dir, "got"), filepath.Join(dir, "ready")
	listener := `import socket, sys
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(1); open(sys.argv[3], "w").close()
s.settimeout(10); c, _ = s.accept(); c.settimeout(5); d = b""
try:
    while len(d) < 1 << 20:
        x = c.recv(65536)
        if not x: break
        d += x
except Exception: pass
open(sys.argv[2], "wb").write(d)
`
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	l := exec.CommandContext(ctx, "setpriv", "--reuid", other, "--regid", other, "--clear-groups",
		"/usr/bin/python3", "-c", listener, sock, got, ready)
	l.Dir = dir
	if err := l.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Process.Kill(); _ = l.Wait() }()
	waitFor(t, 30*time.Second, "the other user's listener", func() bool {
		_, err := os.Stat(ready)
		return err == nil
	})
	if err := os.Chown(sock, 0, 0); err != nil {
		t.Fatal(err)
	}
	follow := exec.CommandContext(ctx, testutil.Cordon(t), "audit", "follow", "-o", "unix:"+sock, "last")
	follow.Dir, follow.Env = w.ws, w.env
	out, ferr := follow.CombinedOutput()
	_ = l.Wait() // the listener ends at EOF, or 10s after cordon never connected
	stolen, _ := os.ReadFile(got)
	if len(stolen) > 0 {
		t.Errorf("uid %s, answering on a socket file root owns, received %d bytes of root's run log (follow: %v, %s)", other, len(stolen), ferr, out)
	}
	if ferr == nil || !strings.Contains(string(out), "answered by uid "+other) {
		t.Errorf("audit follow must refuse the socket answered by uid %s: %v, %s", other, ferr, out)
	}
}
