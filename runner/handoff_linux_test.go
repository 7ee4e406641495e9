package runner

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/ctl"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/runner/bwrap"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// loopbackOnly is a backend without a network namespace (as seatbelt is), for the type
// check of takeHello only.
type loopbackOnly struct{ bwrap.Backend }

func (*loopbackOnly) LoopbackEgress() bool { return true }

// TestForgedHelloRefused plays a hostile process 1 on the real control channel: a
// hello with the token but with no descriptor, two, a UDP socket, a host-namespace TCP
// listener, a connected socket, or (on a loopback backend) any descriptor at all. Each
// is refused as a sandbox error (exit 125) that names errListener and says why, process
// 1 gets no ready (only the hang-up), and every descriptor sent is closed on cordon's
// side.
func TestForgedHelloRefused(t *testing.T) {
	tcp, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	conn, err := net.Dial("tcp4", tcp.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	udp, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	files := func(cs ...interface{ File() (*os.File, error) }) func(t *testing.T) []*os.File {
		return func(t *testing.T) []*os.File {
			var out []*os.File
			for _, c := range cs {
				out = append(out, fileOf(t, c))
			}
			return out
		}
	}
	tl := tcp.(*net.TCPListener)
	for _, c := range []struct {
		name    string
		backend sandbox.Backend
		files   func(t *testing.T) []*os.File
		says    string
	}{
		{"none", &bwrap.Backend{}, files(), "sent 0 descriptors"},
		{"two", &bwrap.Backend{}, files(tl, tl), "sent 2 descriptors"},
		{"udp", &bwrap.Backend{}, files(udp.(*net.UDPConn)), "not SOCK_STREAM"},
		{"host listener", &bwrap.Backend{}, files(tl), "cordon's own network namespace"},
		{"connected", &bwrap.Backend{}, files(conn.(*net.TCPConn)), "not listening"},
		{"any on a loopback backend", &loopbackOnly{}, files(tl), "where none were due"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &run{o: &Options{Backend: c.backend}}
			path := filepath.Join(shortDir(t), "c.sock")
			ln, err := listenControl(path)
			if err != nil {
				t.Fatal(err)
			}
			token := newToken()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			type res struct {
				c   *control
				err error
			}
			done := make(chan res, 1)
			go func() {
				cc, err := acceptControl(ctx, ln, token, nil, r.takeHello)
				done <- res{cc, err}
			}()
			pc, err := ctl.Dial(path)
			if err != nil {
				t.Fatal(err)
			}
			defer pc.Close()
			fs := c.files(t)
			if err := pc.Send(ctl.Msg{Op: ctl.OpHello, Token: token}, fs...); err != nil {
				t.Fatal(err)
			}
			ctl.CloseFiles(fs)
			a := <-done
			if a.c != nil {
				a.c.close()
				t.Fatal("the forged hello was taken")
			}
			if !errors.Is(a.err, errListener) || !errors.Is(a.err, errdefs.ErrSandbox) || !strings.Contains(a.err.Error(), c.says) {
				t.Errorf("refusal %v; want errListener, a sandbox error (125), saying %q", a.err, c.says)
			}
			if errdefs.ExitCode(a.err) != errdefs.ExitCannotRun {
				t.Errorf("exit %d for %v; want %d", errdefs.ExitCode(a.err), a.err, errdefs.ExitCannotRun)
			}
			if m, got, err := pc.Recv(); !errors.Is(err, io.EOF) {
				ctl.CloseFiles(got)
				t.Errorf("process 1 got %+v, %v; want the hang-up, no ready", m, err)
			}
		})
	}
	// Every copy sent was closed: only the test's own descriptors of the listener remain.
	if n := socketsOf(t, tl); n != 1 {
		t.Errorf("%d descriptors of the host listener open in this process; want 1 (cordon kept a forged one)", n)
	}
}

// shortDir is a temporary directory with a path short enough for a unix socket.
func shortDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "hs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// socketsOf counts this process's descriptors of l's socket.
func socketsOf(t *testing.T, l *net.TCPListener) int {
	f := fileOf(t, l)
	defer f.Close()
	want, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
	if err != nil {
		t.Fatal(err)
	}
	fds, _ := filepath.Glob("/proc/self/fd/*")
	n := 0
	for _, fd := range fds {
		if l, _ := os.Readlink(fd); l == want {
			n++
		}
	}
	return n - 1 // f itself
}
