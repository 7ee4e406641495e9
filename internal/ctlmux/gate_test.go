package ctlmux

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/ctl"
	"github.com/cordonhq/cordon/internal/linux"
)

// dialGate connects to the pod's gate listener as `cordon gate` in the Pod would, and
// returns the gate service's end too.
func (r *egressRig) dialGate(t *testing.T) (*net.UnixConn, net.Conn) {
	t.Helper()
	c, err := net.Dial("unix", r.gatePath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	gc := acceptWithin(t, r.gate, 10*time.Second)
	if gc == nil {
		t.Fatal("the gate connection did not arrive on the host's gate listener")
	}
	t.Cleanup(func() { gc.Close() })
	c.SetDeadline(time.Now().Add(time.Minute))
	gc.SetDeadline(time.Now().Add(time.Minute))
	return c.(*net.UnixConn), gc
}

// A gate connection arrives on the gate listener, never the egress one, and carries a
// request and its answers both ways; the requester closing is seen by the service
// (which is how a request is withdrawn).
func TestGateRelay(t *testing.T) {
	r := newEgressRig(t)
	if got := r.gate.Addr().String(); got != GateSocket {
		t.Errorf("the gate listener's Addr is %q, want %q", got, GateSocket)
	}
	c, gc := r.dialGate(t)
	r.host.conns.mu.Lock()
	open := r.host.conns.open
	r.host.conns.mu.Unlock()
	if open[portGate] != 1 || open[portEgress] != 0 {
		t.Fatalf("the host holds %d gate and %d egress connections, want 1 and 0", open[portGate], open[portEgress])
	}
	if _, err := c.Write([]byte(`{"op":"request","gate":"push"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(gc).ReadString('\n')
	if err != nil || !strings.Contains(line, `"gate":"push"`) {
		t.Fatalf("the service read %q, %v", line, err)
	}
	for _, answer := range []string{`{"pending":{}}`, `{"outcome":{"approved":true}}`} {
		if _, err := gc.Write([]byte(answer + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	br := bufio.NewReader(c)
	for _, want := range []string{"pending", "outcome"} {
		if line, err := br.ReadString('\n'); err != nil || !strings.Contains(line, want) {
			t.Fatalf("the requester read %q, %v; want the %s", line, err, want)
		}
	}
	c.Close()
	gc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := gc.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("after the requester closed, the service read %d, %v; want EOF", n, err)
	}
}

// Gate connections are bounded apart from egress ones: past MaxGateConns held open
// (each a request waiting for a person), the next is closed at once, and egress, the
// execs and a gate connection freed later are still served.
func TestGateMaxConns(t *testing.T) {
	r := newEgressRig(t)
	var first, firstGC net.Conn
	for i := range MaxGateConns {
		c, gc := r.dialGate(t)
		if i == 0 {
			first, firstGC = c, gc
		}
	}
	if c, err := net.Dial("unix", r.gatePath); err == nil {
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("gate connection %d: read %d, %v; want it closed at once", MaxGateConns+1, n, err)
		}
	} else if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatal(err)
	}
	r.pod.conns.mu.Lock()
	opened := r.pod.conns.last
	r.pod.conns.mu.Unlock()
	if opened != MaxGateConns {
		t.Fatalf("the pod opened %d connections, want %d: one past MaxGateConns was relayed", opened, MaxGateConns)
	}
	c, pc := r.dial(t)
	c.Write([]byte("ping"))
	if _, err := io.ReadFull(pc, make([]byte, 4)); err != nil {
		t.Fatalf("egress while the gates are full: %v", err)
	}
	if g := execs(t, r.sup, []string{"still served"}); g[1].stdout != "cmd:still served" {
		t.Errorf("exec while the gates are full: %+v", g[1])
	}
	first.Close()
	firstGC.Close()
	waitFor(t, "a gate connection to be forgotten", func() bool {
		r.pod.conns.mu.Lock()
		defer r.pod.conns.mu.Unlock()
		return r.pod.conns.open[portGate] == MaxGateConns-1
	})
	gc2, sc2 := r.dialGate(t)
	gc2.Write([]byte("x"))
	if _, err := io.ReadFull(sc2, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
}

// A gate requester that reads nothing stalls its own connection only: the service's
// writes fill its window, and egress and the execs go on.
func TestGateStalledConnection(t *testing.T) {
	r := newEgressRig(t)
	_, gc := r.dialGate(t)
	written := make(chan struct{})
	go func() {
		gc.Write(make([]byte, 64<<20))
		close(written)
	}()
	waitFor(t, "the stalled gate connection's window to fill", func() bool {
		r.host.conns.mu.Lock()
		defer r.host.conns.mu.Unlock()
		for _, c := range r.host.conns.live {
			if c.port == portGate && c.credit == 0 {
				return true
			}
		}
		return false
	})
	if g := execs(t, r.sup, []string{"still served"}); g[1].stdout != "cmd:still served" {
		t.Errorf("exec during the stall: %+v", g[1])
	}
	c, pc := r.dial(t)
	c.Write([]byte("ping"))
	if _, err := io.ReadFull(pc, make([]byte, 4)); err != nil {
		t.Errorf("egress during the stall: %v", err)
	}
	select {
	case <-written:
		t.Fatal("the stalled gate connection was not stalled")
	default:
	}
}

// The pod takes a unix listener only on exactly GateSocket, and one of each kind.
func TestCheckGateListener(t *testing.T) {
	path := t.TempDir() + "/gate.sock"
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	f, err := ln.(*net.UnixListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	port, err := checkListener(f)
	if port != portGate || err == nil || !strings.Contains(err.Error(), "not "+GateSocket) {
		t.Fatalf("checkListener = %d, %v; want the gate port with its path refused", port, err)
	}
	// A connected (not listening) unix socket is refused too.
	a, b, err := socketPair()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	defer b.Close()
	if _, err := checkListener(a); err == nil || !strings.Contains(err.Error(), "not listening") {
		t.Fatalf("checkListener of a connected socket = %v, want not listening", err)
	}
}

func socketPair() (*os.File, *os.File, error) {
	a, b, err := linux.StreamPair()
	if err != nil {
		return nil, nil, err
	}
	defer a.Close()
	defer b.Close()
	fa, err := a.File()
	if err != nil {
		return nil, nil, err
	}
	fb, err := b.File()
	if err != nil {
		fa.Close()
		return nil, nil, err
	}
	return fa, fb, nil
}

// Two listeners of one kind end the relay: process 1 hands over one of each at most.
func TestPodRefusesTwoGateListeners(t *testing.T) {
	podEnd, initEnd := pair(t)
	dir := t.TempDir()
	var files []*os.File
	for _, name := range []string{"a", "b"} {
		ln, err := net.Listen("unix", dir+"/"+name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := ln.(*net.UnixListener).File()
		ln.Close()
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if err := initEnd.Send(ctl.Msg{Op: ctl.OpStatus}, files...); err != nil {
		t.Fatal(err)
	}
	ctl.CloseFiles(files)
	pr, pw := io.Pipe()
	defer pw.Close()
	p := newPod(podEnd, io.Discard, func(*os.File) (byte, error) { return portGate, nil })
	done := make(chan error, 1)
	go func() { done <- p.run(pr) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "two gate listeners") {
			t.Fatalf("Pod = %v, want two gate listeners refused", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Pod still runs")
	}
}
