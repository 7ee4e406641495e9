package runner

import (
	"errors"
	"net"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
)

// TestPeerCommandGone: a gate request whose connecting process has exited (a child
// holds the connection on) is credited to no command: peerCommand says the peer is
// gone, where it used to give "" and the session's current command was taken, another
// command's. A live peer outside any command cgroup is "" (the caller's fallback).
func TestPeerCommandGone(t *testing.T) {
	py, err := exec.LookPath("python3")
	testutil.Require(t, err == nil, "python3 connects and exits, leaving its child on the socket")
	sock := filepath.Join(t.TempDir(), "gate.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	self, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer self.Close()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if id, err := peerCommand(c); id != "" || err != nil {
		t.Errorf("a live peer in no command cgroup: %q, %v; want \"\", nil", id, err)
	}
	c.Close()

	// The connecting process forks a child that keeps the connection, and exits.
	script := `import os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
if os.fork() == 0:
    s.recv(1)  # until the test closes its end
os._exit(0)
`
	cmd := exec.Command(py, "-c", script, sock)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	// The child holds the connection: reading it blocks until the deadline.
	_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	var ne net.Error
	if n, err := c.Read(make([]byte, 1)); n != 0 || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("the connection should be held open by the child: %d, %v", n, err)
	}
	if id, err := peerCommand(c); id != "" || !errors.Is(err, errPeerGone) {
		t.Errorf("a peer that exited: %q, %v; want errPeerGone", id, err)
	}
}
