package egress

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/testutil"
)

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (accepted, dialed *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	a, err := ln.Accept()
	if err != nil {
		d.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); d.Close() })
	return a.(*net.TCPConn), d.(*net.TCPConn)
}

// A splice carries its bytes exactly and widens the send buffer of the socket it writes
// to (when net.core.wmem_max allows it), never the one it reads from.
func TestSpliceWidensSendBuffer(t *testing.T) {
	srvEnd, srcEnd := tcpPair(t) // the upstream writes into srvEnd; the proxy reads srcEnd
	dstEnd, cliEnd := tcpPair(t) // the proxy writes dstEnd; the client reads cliEnd
	src, dst := newIdleConn(srcEnd, time.Minute), newIdleConn(dstEnd, time.Minute)
	go func() {
		io.Copy(srvEnd, io.LimitReader(testutil.RandReader(7), spliceSize))
		srvEnd.CloseWrite()
	}()
	got := make(chan string, 1)
	go func() { got <- sha256Hex(t, cliEnd) }() // t.Errorf only: safe off the test goroutine
	n, handled, err := spliceCopy(dst, src, -1)
	if !handled || err != nil || n != spliceSize {
		t.Fatalf("spliceCopy = %d, %v, %v; want %d, true, nil", n, handled, err, spliceSize)
	}
	dstEnd.CloseWrite()
	if sum, want := <-got, wantSum(spliceSize, 7); sum != want {
		t.Fatalf("client got %s; want %s", sum, want)
	}
	if src.nread.Load() != spliceSize || dst.nwritten.Load() != spliceSize {
		t.Fatalf("counted %d read, %d written; want %d both", src.nread.Load(), dst.nwritten.Load(), spliceSize)
	}
	widened := linux.WidenSendBuffer(rawSocket(cliEnd)) // what this machine allows
	if d := sendBuffer(t, dstEnd); widened != (d >= 2*linux.SpliceSendBuffer) {
		t.Fatalf("destination's send buffer %d; widening allowed: %v", d, widened)
	}
	if s := sendBuffer(t, srcEnd); s >= 2*linux.SpliceSendBuffer {
		t.Fatalf("source's send buffer %d: widened, but nothing was written to it", s)
	}
}

func sendBuffer(t *testing.T, c *net.TCPConn) int {
	t.Helper()
	n, err := linux.SendBuffer(rawSocket(c))
	if err != nil {
		t.Fatal(err)
	}
	return n
}
