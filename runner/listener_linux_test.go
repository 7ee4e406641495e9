package runner

import (
	"context"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/ctl"
	"github.com/cordonhq/cordon/internal/testutil"
)

// fileOf is a descriptor of c's socket, the caller's to close.
func fileOf(t *testing.T, c interface{ File() (*os.File, error) }) *os.File {
	t.Helper()
	f, err := c.File()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestEgressListenerRefusesForgeries hands egressListener real sockets of the host's
// (as a hostile process 1 might, had it one): each is refused, with its reason.
func TestEgressListenerRefusesForgeries(t *testing.T) {
	tcp, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	hostAddr := netip.MustParseAddrPort(tcp.Addr().String())
	udp, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	unix, err := net.Listen("unix", filepath.Join(t.TempDir(), "s"))
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close()
	conn, err := net.Dial("tcp4", tcp.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	pipeR, pipeW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pipeW.Close()
	for _, c := range []struct {
		name string
		f    *os.File
		want netip.AddrPort
		says string
	}{
		{"host-namespace listener", fileOf(t, tcp.(*net.TCPListener)), hostAddr, "cordon's own network namespace"},
		{"wrong address", fileOf(t, tcp.(*net.TCPListener)), netip.MustParseAddrPort("127.0.0.1:3128"), "not 127.0.0.1:3128"},
		{"udp", fileOf(t, udp.(*net.UDPConn)), hostAddr, "not SOCK_STREAM"},
		{"unix", fileOf(t, unix.(*net.UnixListener)), hostAddr, "not AF_INET"},
		{"connected, not listening", fileOf(t, conn.(*net.TCPConn)), hostAddr, "not listening"},
		{"not a socket", pipeR, hostAddr, "not a socket"},
	} {
		ln, err := egressListener(c.f, c.want)
		if err == nil {
			ln.Close()
			t.Errorf("%s: accepted", c.name)
			continue
		}
		if !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v; want it to say %q", c.name, err, c.says)
		}
		if _, err := c.f.Stat(); err == nil {
			t.Errorf("%s: the descriptor was left open", c.name)
		}
	}
}

// TestEgressListenerAcceptsTheSandboxs takes a listener made in a network namespace of
// its own (by this test binary under bwrap --unshare-net, handed over as process 1 does)
// and serves a connection made in that namespace through it.
func TestEgressListenerAcceptsTheSandboxs(t *testing.T) {
	if os.Getenv("CORDON_TEST_HANDOVER") != "" {
		return // the helper below
	}
	bwrap, err := exec.LookPath("bwrap")
	testutil.Require(t, err == nil, "bwrap is not installed")
	sock := filepath.Join(t.TempDir(), "c.sock")
	cl, err := ctl.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bwrap, "--unshare-net", "--dev-bind", "/", "/", "--", os.Args[0], "-test.run=^TestHandoverHelper$")
	cmd.Env = append(os.Environ(), "CORDON_TEST_HANDOVER="+sock)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Wait() }()
	uc, err := cl.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	c := ctl.New(uc)
	defer c.Close()
	m, files, err := c.Recv()
	if err != nil || m.Op != ctl.OpHello || len(files) != 1 {
		ctl.CloseFiles(files)
		t.Fatalf("hello: %+v, %d files, %v; helper: %s", m, len(files), err, out)
	}
	ln, err := egressListener(files[0], netip.MustParseAddrPort("127.0.0.1:3128"))
	if err != nil {
		t.Fatalf("the sandbox's listener was refused: %v", err)
	}
	defer ln.Close()
	go func() {
		if a, err := ln.Accept(); err == nil {
			a.Write([]byte("served\n"))
			a.Close()
		}
	}()
	if err := c.Send(ctl.Msg{Op: ctl.OpReady}); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper: %v: %s", err, out)
	}
	if !strings.Contains(out.String(), "got served") {
		t.Errorf("the helper's connection was not served through the handed-over listener: %s", out)
	}
}

// TestHandoverHelper is the sandbox's side of TestEgressListenerAcceptsTheSandboxs.
func TestHandoverHelper(t *testing.T) {
	sock := os.Getenv("CORDON_TEST_HANDOVER")
	if sock == "" {
		return // run by TestEgressListenerAcceptsTheSandboxs only
	}
	var lc net.ListenConfig
	lc.SetMultipathTCP(false)
	ln, err := lc.Listen(context.Background(), "tcp4", "127.0.0.1:3128")
	if err != nil {
		t.Fatal(err)
	}
	f := fileOf(t, ln.(*net.TCPListener))
	ln.Close()
	c, err := ctl.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Send(ctl.Msg{Op: ctl.OpHello}, f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if m, _, err := c.Recv(); err != nil || m.Op != ctl.OpReady {
		t.Fatalf("ready: %+v %v", m, err)
	}
	conn, err := net.Dial("tcp4", "127.0.0.1:3128")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	buf := make([]byte, 16)
	n, _ := conn.Read(buf)
	os.Stdout.WriteString("got " + string(buf[:n]))
}
