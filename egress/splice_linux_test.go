package egress

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/egress/policy"
	"github.com/cordonhq/cordon/internal/event"
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

// splicedSince returns the bytes spliced since a reading of spliced.
func splicedSince(before int64) int64 { return spliced.Load() - before }

// A large CONNECT tunnel that carries bytes both ways through splice reports exactly the
// bytes that crossed it in each direction: the client's greeting, which the proxy
// forwards from its own buffer, plus the spliced upload; and the spliced download.
func TestSpliceConnectCountsExact(t *testing.T) {
	const greeting, up, down = "hello\n", spliceSize + 12345, spliceSize + 54321
	port := rawServer(t, func(c net.Conn) {
		go func() {
			defer c.Close()
			br := bufio.NewReader(c)
			if l, err := br.ReadString('\n'); err != nil || l != greeting {
				return
			}
			// Answer the greeting, then read the upload and answer with the download.
			io.WriteString(c, "ready\n")
			if n, err := io.CopyN(io.Discard, br, up); err != nil || n != up {
				return
			}
			io.CopyN(c, testutil.RandReader(21), down)
			c.(*net.TCPConn).CloseWrite()
			io.Copy(io.Discard, br) // until the client closes
		}()
	})
	e := startEnv(t, []policy.Rule{cidrRule(port)}, fakeResolver{}, Config{})
	hp := "127.0.0.1:" + strconv.Itoa(int(port))
	before := spliced.Load()
	resp, c, br := rawExchange(t, e, "CONNECT "+hp+" HTTP/1.1\r\nHost: "+hp+"\r\n\r\n")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT: status %d", resp.StatusCode)
	}
	io.WriteString(c, greeting)
	if l, err := br.ReadString('\n'); err != nil || l != "ready\n" {
		t.Fatalf("server's answer %q, %v", l, err)
	}
	if _, err := io.CopyN(c, testutil.RandReader(20), up); err != nil {
		t.Fatal(err)
	}
	if got, want := sha256Hex(t, br), wantSum(down, 21); got != want {
		t.Fatalf("client got %s, want %s", got, want)
	}
	c.Close()
	typ, ev := e.events.nth(t, 1)
	if typ != event.NetAllow || ev.Error != "" {
		t.Fatalf("event %s %+v, want an allow without error", typ, ev)
	}
	if wantUp := int64(len(greeting)) + up; ev.BytesUp != wantUp || ev.BytesDown != down+int64(len("ready\n")) {
		t.Errorf("event bytes up %d, down %d; want %d, %d", ev.BytesUp, ev.BytesDown, wantUp, down+int64(len("ready\n")))
	}
	if s := splicedSince(before); s < up+down-2*linux.PipeSize {
		t.Errorf("spliced %d bytes of %d: the tunnel did not take the kernel path", s, up+down)
	}
}

// A large plain-HTTP download framed by Content-Length is spliced and its event counts
// exactly the body's bytes; on the same kept-alive connection a small request after it is
// still parsed and checked on its own, and counted on its own.
func TestSpliceHTTPCountsExact(t *testing.T) {
	const size = spliceSize + 777
	srv := spliceServer(t)
	e := startEnv(t, []policy.Rule{cidrRule(portOf(t, srv.URL))}, fakeResolver{}, Config{})
	c := proxyClient(t, e, nil)
	before := spliced.Load()
	resp, err := c.Get(fmt.Sprintf("%s/bytes?n=%d&seed=31", srv.URL, size))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := bodyHash(t, resp), wantSum(size, 31); got != want {
		t.Fatalf("body %s, want %s", got, want)
	}
	if s := splicedSince(before); s < size-2*upstreamReadBuf {
		t.Errorf("spliced %d bytes of %d: the body did not take the kernel path", s, size)
	}
	resp, err = c.Post(srv.URL+"/sha256", "application/octet-stream", strings.NewReader("abc"))
	if err != nil {
		t.Fatal(err)
	}
	small := readBody(t, resp.Body)
	evs := e.events.wait(t, 2)
	if ev := evs[0].Body.(event.NetBody); ev.BytesDown != size || ev.BytesUp != 0 {
		t.Errorf("download event: up %d, down %d; want 0, %d", ev.BytesUp, ev.BytesDown, size)
	}
	if ev := evs[1].Body.(event.NetBody); ev.BytesUp != 3 || ev.BytesDown != int64(len(small)) {
		t.Errorf("small request's event: up %d, down %d; want 3, %d", ev.BytesUp, ev.BytesDown, len(small))
	}
}

// A tunnel that moved bytes through splice in both directions and then falls silent is
// ended by the idle timeout, and its event still counts every byte.
func TestSpliceIdleTunnelEnds(t *testing.T) {
	const greeting, up, down = "hello\n", 3 << 20, 5 << 20
	held := make(chan struct{})
	t.Cleanup(func() { close(held) })
	port := rawServer(t, func(c net.Conn) {
		go func() {
			defer c.Close()
			br := bufio.NewReader(c)
			if _, err := br.ReadString('\n'); err != nil {
				return
			}
			io.WriteString(c, "ready\n")
			if _, err := io.CopyN(io.Discard, br, up); err != nil {
				return
			}
			io.CopyN(c, testutil.RandReader(41), down)
			<-held // silent, the connection open, until the test ends
		}()
	})
	const idle = 300 * time.Millisecond
	e := startEnv(t, []policy.Rule{cidrRule(port)}, fakeResolver{}, Config{IdleTimeout: idle})
	hp := "127.0.0.1:" + strconv.Itoa(int(port))
	before := spliced.Load()
	resp, c, br := rawExchange(t, e, "CONNECT "+hp+" HTTP/1.1\r\nHost: "+hp+"\r\n\r\n")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT: status %d", resp.StatusCode)
	}
	io.WriteString(c, greeting)
	if l, err := br.ReadString('\n'); err != nil || l != "ready\n" {
		t.Fatalf("server's answer %q, %v", l, err)
	}
	if _, err := io.CopyN(c, testutil.RandReader(40), up); err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(io.Discard, br, down); err != nil {
		t.Fatal(err)
	}
	if s := splicedSince(before); s < up+down-2*linux.PipeSize {
		t.Fatalf("spliced %d bytes of %d: the tunnel did not take the kernel path", s, up+down)
	}
	start := time.Now()
	c.SetReadDeadline(start.Add(10 * time.Second))
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("reading the silent tunnel: %v, want the proxy to close it (EOF)", err)
	}
	if d := time.Since(start); d < idle/2 || d > 5*time.Second {
		t.Errorf("the silent tunnel ended after %s; idle timeout %s", d, idle)
	}
	typ, ev := e.events.nth(t, 1)
	if typ != event.NetAllow {
		t.Fatalf("event %s %+v, want an allow", typ, ev)
	}
	if ev.BytesUp != int64(len(greeting))+up || ev.BytesDown != down+int64(len("ready\n")) {
		t.Errorf("event bytes up %d, down %d; want %d, %d", ev.BytesUp, ev.BytesDown, int64(len(greeting))+up, down+int64(len("ready\n")))
	}
}
