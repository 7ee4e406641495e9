package server

import (
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/server/config"
)

// sockDir is a directory the socket may live in: the test user's own, mode 0700.
func sockDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "srv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func TestListenUnixMode(t *testing.T) {
	p := filepath.Join(sockDir(t), "run", "c.sock")
	ln, err := listenUnix(&config.Unix{Path: p, Mode: 0o660})
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Lstat(p)
	if err != nil || st.Mode().Type() != os.ModeSocket || st.Mode().Perm() != 0o660 {
		t.Errorf("socket: %v %v; want a socket, mode 0660", st.Mode(), err)
	}
	if dst, _ := os.Stat(filepath.Dir(p)); dst.Mode().Perm() != 0o711 {
		t.Errorf("made directory: mode %04o; want 0711", dst.Mode().Perm())
	}
	ln.Close()
	if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket after Close: %v; want removed", err)
	}
}

func TestListenUnixRefuses(t *testing.T) {
	t.Run("a file in the way", func(t *testing.T) {
		p := filepath.Join(sockDir(t), "c.sock")
		os.WriteFile(p, []byte("keep me"), 0o600)
		if _, err := listenUnix(&config.Unix{Path: p, Mode: 0o600}); err == nil || !strings.Contains(err.Error(), "is not a socket") {
			t.Errorf("got %v; want refused", err)
		}
		if b, _ := os.ReadFile(p); string(b) != "keep me" {
			t.Errorf("the file was changed: %q", b)
		}
	})
	t.Run("a server already listening", func(t *testing.T) {
		p := filepath.Join(sockDir(t), "c.sock")
		live, err := net.Listen("unix", p)
		if err != nil {
			t.Fatal(err)
		}
		defer live.Close()
		if _, err := listenUnix(&config.Unix{Path: p, Mode: 0o600}); err == nil || !strings.Contains(err.Error(), "another server") {
			t.Errorf("got %v; want refused", err)
		}
	})
	t.Run("a directory others can write", func(t *testing.T) {
		d := sockDir(t)
		os.Chmod(d, 0o777)
		if _, err := listenUnix(&config.Unix{Path: filepath.Join(d, "c.sock"), Mode: 0o600}); !errors.Is(err, paths.ErrUnsafe) {
			t.Errorf("got %v; want ErrUnsafe", err)
		}
	})
	t.Run("a stale socket is replaced", func(t *testing.T) {
		p := filepath.Join(sockDir(t), "c.sock")
		old, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		old.SetUnlinkOnClose(false)
		old.Close() // as a server killed with SIGKILL leaves it
		ln, err := listenUnix(&config.Unix{Path: p, Mode: 0o600})
		if err != nil {
			t.Fatalf("got %v; want the stale socket replaced", err)
		}
		ln.Close()
	})
}

// TestPeerUID: a unix connection carries its peer's uid; a TCP one carries none (not 0).
func TestPeerUID(t *testing.T) {
	p := filepath.Join(sockDir(t), "c.sock")
	u, err := listenUnix(&config.Unix{Path: p, Mode: 0o600})
	if err != nil {
		t.Fatal(err)
	}
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ln   net.Listener
		net  string
		want int
	}{{u, "unix", os.Geteuid()}, {tcp, "tcp", -1}} {
		l := newLimitListener(tc.ln, 1, 1)
		c, err := net.Dial(tc.net, tc.ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		got, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		ctx := connContext(t.Context(), got)
		uid, ok := peerUID(ctx)
		if tc.want < 0 && ok || tc.want >= 0 && (!ok || uid != tc.want) {
			t.Errorf("%s: peer uid %d %v; want %d", tc.net, uid, ok, tc.want)
		}
		c.Close()
		got.Close()
		l.Close()
	}
}

// TestLimitListener: past n open connections serving requests, Accept waits until
// one closes.
func TestLimitListener(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newLimitListener(inner, 1, 2)
	defer l.Close()
	for range 2 {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	first, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	l.setWaiting(first.(*limitConn), false) // serving a request
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	select {
	case <-accepted:
		t.Fatal("a second connection was accepted while the first was open")
	default:
	}
	if len(l.sem) != 1 {
		t.Fatalf("slots in use: %d; want 1", len(l.sem))
	}
	first.Close()
	first.Close() // closing twice releases one slot only
	(<-accepted).Close()
	if len(l.sem) != 0 {
		t.Errorf("slots in use after both closed: %d; want 0", len(l.sem))
	}
}

// TestLimitListenerPerPeer: a peer past its share is closed at once and costs no slot;
// when one of its connections closes, it may open another.
func TestLimitListenerPerPeer(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newLimitListener(inner, 3, 2)
	defer l.Close()
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	dial()
	dial()
	first, second := <-accepted, <-accepted
	defer second.Close()
	// With 3 slots, a refused connection that kept its slot would block the fourth
	// refusal behind a full listener.
	for i := range 5 {
		extra := dial()
		extra.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := extra.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("connection %d past the peer's share: read %v; want EOF (closed by the listener)", i+3, err)
		}
	}
	first.Close()
	dial()
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(10 * time.Second):
		t.Error("after one closed, a new connection from the peer was not accepted")
	}
}

// TestLimitListenerClosesWaiting: when every slot is taken, a connection waiting for a
// request is closed to admit a new one: of the peer holding the most, the oldest; a
// connection serving a request is never closed.
func TestLimitListenerClosesWaiting(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newLimitListener(inner, 3, 3)
	defer l.Close()
	dial := func(local string) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
		c, err := d.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	accept := func() *limitConn {
		c, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c.(*limitConn)
	}
	dial("127.0.0.1")
	busy := accept()
	l.setWaiting(busy, false) // serving a request
	a1 := dial("127.0.0.2")
	accept()
	dial("127.0.0.2")
	accept()
	dial("127.0.0.3")
	accept() // the listener was full: 127.0.0.2's oldest was closed for it
	a1.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := a1.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the oldest waiting connection of the largest peer: read %v; want EOF", err)
	}
	if busy.closed {
		t.Error("a connection serving a request was closed for a new one")
	}
	if len(l.sem) != 3 {
		t.Errorf("slots in use: %d; want 3", len(l.sem))
	}
}

// TestPeerOfIPv6: IPv6 peers share per /64, IPv4 ones per address.
func TestPeerOfIPv6(t *testing.T) {
	for addr, want := range map[string]string{
		"2001:db8:1:2:aaaa::1":  "2001:db8:1:2::/64",
		"2001:db8:1:2:ffff::99": "2001:db8:1:2::/64",
		"::ffff:192.0.2.7":      "192.0.2.7",
		"192.0.2.7":             "192.0.2.7",
	} {
		c := &limitConn{Conn: fakeRemote{&net.TCPAddr{IP: net.ParseIP(addr), Port: 1}}, uid: -1}
		if got := peerOf(c); got != want {
			t.Errorf("peerOf(%s) = %q; want %q", addr, got, want)
		}
	}
}

type fakeRemote struct{ addr net.Addr }

func (f fakeRemote) RemoteAddr() net.Addr           { return f.addr }
func (fakeRemote) Read([]byte) (int, error)         { return 0, io.EOF }
func (fakeRemote) Write(b []byte) (int, error)      { return len(b), nil }
func (fakeRemote) Close() error                     { return nil }
func (fakeRemote) LocalAddr() net.Addr              { return nil }
func (fakeRemote) SetDeadline(time.Time) error      { return nil }
func (fakeRemote) SetReadDeadline(time.Time) error  { return nil }
func (fakeRemote) SetWriteDeadline(time.Time) error { return nil }
