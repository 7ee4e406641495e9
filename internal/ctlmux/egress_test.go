package ctlmux

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/ctl"
)

// egressRig is a relay with egress and gates: a fake process 1 that hands a TCP
// listener and a unix listener over with its status and runs execs as fakeInit does,
// the pod and host ends over in-memory pipes, and the host's Listeners, where the
// "proxy" and the "gate service" accept.
type egressRig struct {
	sup      *ctl.Conn
	ln       *Listener
	gate     *Listener
	addr     string // the pod's egress listener, where "commands" connect
	gatePath string // the pod's gate listener
	pod      *pod
	host     *host
	h2pW     *io.PipeWriter
	done     chan struct{} // closed when Host and Pod have returned
}

func newEgressRig(t *testing.T) *egressRig {
	t.Helper()
	sup, hostEnd := pair(t)
	podEnd, initEnd := pair(t)
	tl, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lf, err := tl.(*net.TCPListener).File()
	tl.Close()
	if err != nil {
		t.Fatal(err)
	}
	gatePath := filepath.Join(t.TempDir(), "gate.sock")
	ul, err := net.Listen("unix", gatePath)
	if err != nil {
		t.Fatal(err)
	}
	ul.(*net.UnixListener).SetUnlinkOnClose(false)
	gf, err := ul.(*net.UnixListener).File()
	ul.Close()
	if err != nil {
		t.Fatal(err)
	}
	r := &egressRig{sup: sup, ln: NewListener(), gate: NewGateListener(), addr: tl.Addr().String(),
		gatePath: gatePath, done: make(chan struct{})}
	go func() {
		m, files, err := initEnd.Recv()
		ctl.CloseFiles(files)
		if err != nil || m.Op != ctl.OpSpec {
			return
		}
		_ = initEnd.Send(ctl.Msg{Op: ctl.OpStatus}, gf, lf)
		lf.Close()
		gf.Close()
		fakeInit(initEnd)
	}()
	h2pR, h2pW := io.Pipe()
	p2hR, p2hW := io.Pipe()
	r.h2pW = h2pW
	r.pod = newPod(podEnd, p2hW, func(f *os.File) (byte, error) { // any listener: by its kind
		ln, err := net.FileListener(f)
		if err != nil {
			return 0, err
		}
		defer ln.Close()
		if ln.Addr().Network() == "unix" {
			return portGate, nil
		}
		return portEgress, nil
	})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = r.pod.run(h2pR); p2hW.Close() }()
	r.host = newHost(hostEnd, h2pW, Listeners{Egress: r.ln, Gate: r.gate})
	go func() { defer wg.Done(); _ = r.host.run(rwc{p2hR, h2pW}); h2pR.Close() }()
	go func() { wg.Wait(); close(r.done) }()
	t.Cleanup(func() {
		sup.Close()
		<-r.done
	})
	if err := sup.Send(ctl.Msg{Op: ctl.OpSpec, Spec: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	m, files, err := sup.Recv()
	if err != nil || m.Op != ctl.OpStatus || m.Error != "" || len(files) != 0 {
		t.Fatalf("status %+v, %d descriptors, %v; want a clean status without descriptors", m, len(files), err)
	}
	return r
}

// dial connects as a command in the Pod would, and returns the proxy's end too.
func (r *egressRig) dial(t *testing.T) (*net.TCPConn, net.Conn) {
	t.Helper()
	c, err := net.Dial("tcp4", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	pc := acceptWithin(t, r.ln, 10*time.Second)
	if pc == nil {
		t.Fatal("the connection did not arrive on the host's listener")
	}
	t.Cleanup(func() { pc.Close() })
	// A relay that loses an end fails the test rather than hanging it.
	c.SetDeadline(time.Now().Add(time.Minute))
	pc.SetDeadline(time.Now().Add(time.Minute))
	return c.(*net.TCPConn), pc
}

func acceptWithin(t *testing.T, ln net.Listener, d time.Duration) net.Conn {
	t.Helper()
	ch := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			c = nil
		}
		ch <- c
	}()
	select {
	case c := <-ch:
		return c
	case <-time.After(d):
		return nil
	}
}

// waitFor polls cond until it holds, or fails after 10 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (r *egressRig) live() int {
	r.pod.conns.mu.Lock()
	defer r.pod.conns.mu.Unlock()
	return len(r.pod.conns.live)
}

// A connection is relayed both ways, many windows' worth each way at once and intact,
// and each direction's end arrives on its own: the command half-closes and still
// reads the proxy's answer; the proxy half-closes and still reads the command's.
func TestEgressRelay(t *testing.T) {
	r := newEgressRig(t)
	c, pc := r.dial(t)
	up, down := randBytes(t, 40*connWindow+5), randBytes(t, 30*connWindow+3)
	var wg sync.WaitGroup
	var gotUp, gotDown []byte
	var errUp, errDown error
	wg.Add(4)
	go func() { defer wg.Done(); c.Write(up); c.CloseWrite() }()
	go func() { defer wg.Done(); gotUp, errUp = io.ReadAll(pc) }()
	go func() { defer wg.Done(); pc.Write(down); pc.(*net.UnixConn).CloseWrite() }()
	go func() { defer wg.Done(); gotDown, errDown = io.ReadAll(c) }()
	wg.Wait()
	if errUp != nil || errDown != nil {
		t.Fatalf("the ends did not arrive: up %v, down %v", errUp, errDown)
	}
	if sha256.Sum256(gotUp) != sha256.Sum256(up) || sha256.Sum256(gotDown) != sha256.Sum256(down) {
		t.Fatalf("up %d of %d bytes, down %d of %d bytes, or not intact", len(gotUp), len(up), len(gotDown), len(down))
	}
	// Both ends closed: the id is forgotten on both sides.
	c.Close()
	pc.Close()
	waitFor(t, "the connection to be forgotten", func() bool { return r.live() == 0 })

	// The command's end first, then an answer after it.
	c, pc = r.dial(t)
	c.Write([]byte("request"))
	c.CloseWrite()
	if got, err := io.ReadAll(pc); string(got) != "request" || err != nil {
		t.Fatalf("the proxy read %q, %v", got, err)
	}
	pc.Write([]byte("answer"))
	pc.Close()
	if got, err := io.ReadAll(c); string(got) != "answer" || err != nil {
		t.Fatalf("the command read %q, %v", got, err)
	}
}

// A dozen connections at once, each its own bytes.
func TestEgressConcurrent(t *testing.T) {
	r := newEgressRig(t)
	go func() {
		for {
			pc, err := r.ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(pc, pc); pc.Close() }() // echo
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 12)
	for range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp4", r.addr)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			b := randBytes(t, 3*connWindow)
			go func() { c.Write(b); c.(*net.TCPConn).CloseWrite() }()
			got, _ := io.ReadAll(c)
			if !bytes.Equal(got, b) {
				errs <- errors.New("an echo came back different")
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A command that never reads its connection stalls that connection only: once its
// window is full, an exec runs and another connection carries its bytes.
func TestEgressStalledConnection(t *testing.T) {
	r := newEgressRig(t)
	_, stalled := r.dial(t)
	written := make(chan struct{})
	go func() {
		stalled.Write(make([]byte, 64<<20)) // far more than the window and the buffers
		close(written)
	}()
	// The host has sent a whole window the pod has not given back.
	waitFor(t, "the stalled connection's window to fill", func() bool {
		r.host.conns.mu.Lock()
		defer r.host.conns.mu.Unlock()
		for _, c := range r.host.conns.live {
			if c.credit == 0 {
				return true
			}
		}
		return false
	})
	got := make(chan map[uint64]result, 1)
	go func() { got <- execs(t, r.sup, []string{"still served"}) }()
	select {
	case g := <-got:
		if g[1].stdout != "cmd:still served" {
			t.Errorf("exec during the stall: %+v", g[1])
		}
	case <-time.After(20 * time.Second):
		t.Fatal("an exec did not complete while a connection was stalled")
	}
	c, pc := r.dial(t)
	c.Write([]byte("ping"))
	buf := make([]byte, 4)
	if _, err := io.ReadFull(pc, buf); err != nil || string(buf) != "ping" {
		t.Errorf("another connection during the stall: %q, %v", buf, err)
	}
	select {
	case <-written:
		t.Fatal("the stalled connection was not stalled: 64 MiB went to a command that reads nothing")
	default:
	}
}

// At most MaxConns connections at once: the next is reset in the pod and never reaches
// the host; once one is closed, another can be made.
func TestEgressMaxConns(t *testing.T) {
	r := newEgressRig(t)
	var first *net.TCPConn
	var firstPC net.Conn
	for i := range MaxConns {
		c, pc := r.dial(t)
		if i == 0 {
			first, firstPC = c, pc
		}
	}
	// On loopback the reset may come before connect(2) returns.
	if c, err := net.Dial("tcp4", r.addr); err == nil {
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("connection %d: read %d, %v; want it closed at once", MaxConns+1, n, err)
		}
	} else if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatal(err)
	}
	r.pod.conns.mu.Lock()
	opened := r.pod.conns.last
	r.pod.conns.mu.Unlock()
	if opened != MaxConns {
		t.Fatalf("the pod opened %d connections, want %d: one past MaxConns was relayed", opened, MaxConns)
	}
	first.Close()
	firstPC.Close()
	waitFor(t, "a connection to be forgotten", func() bool { return r.live() == MaxConns-1 })
	c2, pc2 := r.dial(t)
	c2.Write([]byte("x"))
	if _, err := io.ReadFull(pc2, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
}

// A reset either way reaches the other end: the proxy closing while the command
// still sends, the command resetting while the proxy still sends.
func TestEgressReset(t *testing.T) {
	r := newEgressRig(t)
	c, pc := r.dial(t)
	pc.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(c); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the command's connection stayed open after the proxy closed")
	}
	// As with TCP, the proxy's close is its end until the command sends more: then
	// the proxy's end is gone, and the connection with it.
	c.Write([]byte("more"))
	waitFor(t, "the connection to be forgotten", func() bool { return r.live() == 0 })

	c, pc = r.dial(t)
	c.SetLinger(0)
	c.Close()
	pc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(pc); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the proxy's connection stayed open after the command reset it")
	}
	waitFor(t, "the connection to be forgotten", func() bool { return r.live() == 0 })
}

// When the stream ends, every relayed connection ends at both ends, and the host's
// listener is closed.
func TestEgressStreamEnd(t *testing.T) {
	r := newEgressRig(t)
	c, pc := r.dial(t)
	r.h2pW.CloseWithError(errors.New("stream broken"))
	<-r.done
	for name, conn := range map[string]net.Conn{"command's": c, "proxy's": pc} {
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadAll(conn); errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("the %s connection stayed open", name)
		}
	}
	if _, err := r.ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after the end: %v, want net.ErrClosed", err)
	}
	// (Not by dialling it: a dial to a closed loopback port may connect to itself.)
	for _, ln := range r.pod.lns {
		if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
			t.Errorf("the pod's listener %v: Accept = %v, want net.ErrClosed", ln.Addr(), err)
		}
	}
}

func randBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// The pod takes only a TCP listener on the proxy address outside its own network
// namespace: a listener of this test's, in its own namespace on another port, is
// refused for both.
func TestCheckListener(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, err = checkListener(f)
	if err == nil || !strings.Contains(err.Error(), "not "+ProxyAddr) || !strings.Contains(err.Error(), "own network namespace") {
		t.Fatalf("checkListener = %v, want the address and the namespace refused", err)
	}
	r, w, _ := os.Pipe()
	defer r.Close()
	defer w.Close()
	if _, err := checkListener(r); err == nil {
		t.Fatal("a pipe passed as a listener")
	}
}

// Process 1's status carrying anything but one listener the check passes ends the
// relay: the host gets the status with the refusal as its error, process 1 a hang-up.
func TestPodRefusesListener(t *testing.T) {
	listener := func(t *testing.T) *os.File {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		f, err := ln.(*net.TCPListener).File()
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	for name, tc := range map[string]struct {
		files   int
		wantErr string
	}{
		"three descriptors": {files: 3, wantErr: "sent 3 descriptors"},
		"wrong listener":    {files: 1, wantErr: "not " + ProxyAddr},
	} {
		t.Run(name, func(t *testing.T) {
			podEnd, initEnd := pair(t)
			var files []*os.File
			for range tc.files {
				files = append(files, listener(t))
			}
			if err := initEnd.Send(ctl.Msg{Op: ctl.OpStatus}, files...); err != nil {
				t.Fatal(err)
			}
			ctl.CloseFiles(files)
			pr, pw := io.Pipe()
			defer pw.Close()
			out := &lockedBuffer{}
			done := make(chan error, 1)
			go func() { done <- Pod(podEnd, pr, out) }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Pod = %v, want an error with %q", err, tc.wantErr)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Pod still runs")
			}
			if _, _, err := initEnd.Recv(); err == nil {
				t.Error("process 1's connection is still open")
			}
			f, err := newReader(strings.NewReader(out.String())).next()
			if err != nil || f.kind != kindMsg {
				t.Fatalf("the host got %v, %v; want the status", f.kind, err)
			}
			m, err := decodeMsg(f)
			if err != nil || m.Op != ctl.OpStatus || !strings.Contains(m.Error, tc.wantErr) {
				t.Fatalf("the host got %+v (%v); want the status with %q", m, err, tc.wantErr)
			}
		})
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
