package egress

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/egress/policy"
	"github.com/cordonhq/cordon/internal/testutil"
)

// The tests in this file cover the paths on which bytes move kernel to kernel (splice on
// Linux): every body must arrive byte-exact, framing and per-request checks must hold.

const spliceSize = 24 << 20 // several pipe loads, and more than any buffer on the way

// spliceServer serves testHandler plus /chunked?n=N&seed=S: N pseudo-random bytes with no
// Content-Length, flushed in pieces, so the response is chunked.
func spliceServer(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/", testHandler())
	mux.HandleFunc("/chunked", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
		seed, _ := strconv.ParseUint(r.URL.Query().Get("seed"), 10, 64)
		src := io.LimitReader(testutil.RandReader(seed), n)
		buf := make([]byte, 100<<10)
		for {
			k, err := src.Read(buf)
			w.Write(buf[:k])
			w.(http.Flusher).Flush()
			if err != nil {
				return
			}
		}
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// bodyHash reads resp's body and returns "N HEX".
func bodyHash(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	return sha256Hex(t, resp.Body)
}

func wantSum(n int64, seed uint64) string {
	return strconv.FormatInt(n, 10) + " " + testutil.SumOf(n, seed)
}

// TestSpliceKeepAlive sends, on one client connection, two large Content-Length downloads
// (the upstream connection is reused between them), a chunked one, and then a request to
// a port the contract does not allow, which must be denied and never dialled.
func TestSpliceKeepAlive(t *testing.T) {
	srv := spliceServer(t)
	hp := portOf(t, srv.URL)
	denied := freePort(t)
	e := startEnv(t, []policy.Rule{cidrRule(hp)}, fakeResolver{}, Config{})
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(60 * time.Second))
	br := bufio.NewReader(c)
	get := func(target string) *http.Response {
		t.Helper()
		host := strings.TrimPrefix(target, "http://")
		host = host[:strings.Index(host, "/")]
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, host)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("GET %s: %v", target, err)
		}
		return resp
	}
	for i, tt := range []struct {
		path string
		seed uint64
	}{{"/bytes", 1}, {"/bytes", 2}, {"/chunked", 3}} {
		resp := get(fmt.Sprintf("%s%s?n=%d&seed=%d", srv.URL, tt.path, spliceSize, tt.seed))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: status %d", i, resp.StatusCode)
		}
		if got, want := bodyHash(t, resp), wantSum(spliceSize, tt.seed); got != want {
			t.Fatalf("request %d (%s): body %s, want %s", i, tt.path, got, want)
		}
	}
	resp := get(fmt.Sprintf("http://127.0.0.1:%d/hello", denied))
	readBody(t, resp.Body)
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("request to a denied port: status %d, want 403", resp.StatusCode)
	}
	if e.dialedAddrPort(denied) {
		t.Errorf("the proxy dialled the denied port %d", denied)
	}
	e.events.wait(t, 4)
}

// TestSpliceUploads sends large request bodies with Content-Length and chunked.
func TestSpliceUploads(t *testing.T) {
	srv := spliceServer(t)
	e := startEnv(t, []policy.Rule{cidrRule(portOf(t, srv.URL))}, fakeResolver{}, Config{})
	c := proxyClient(t, e, nil)
	for _, tt := range []struct {
		name   string
		length int64
	}{{"content-length", spliceSize}, {"chunked", -1}} {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", srv.URL+"/sha256", io.NopCloser(io.LimitReader(testutil.RandReader(5), spliceSize)))
			req.ContentLength = tt.length
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := readBody(t, resp.Body), wantSum(spliceSize, 5); got != want {
				t.Errorf("server received %s, want %s", got, want)
			}
		})
	}
}

// TestSpliceConnect runs a download and an upload through one CONNECT tunnel each.
func TestSpliceConnect(t *testing.T) {
	srv := spliceServer(t)
	e := startEnv(t, []policy.Rule{cidrRule(portOf(t, srv.URL))}, fakeResolver{}, Config{})
	host := strings.TrimPrefix(srv.URL, "http://")
	tunnelTo := func() (net.Conn, *bufio.Reader) {
		resp, c, br := rawExchange(t, e, "CONNECT "+host+" HTTP/1.1\r\nHost: "+host+"\r\n\r\n")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("CONNECT: status %d", resp.StatusCode)
		}
		return c, br
	}
	c, br := tunnelTo()
	fmt.Fprintf(c, "GET /bytes?n=%d&seed=11 HTTP/1.1\r\nHost: %s\r\n\r\n", spliceSize, host)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := bodyHash(t, resp), wantSum(spliceSize, 11); got != want {
		t.Errorf("download through the tunnel: %s, want %s", got, want)
	}
	c, br = tunnelTo()
	fmt.Fprintf(c, "POST /sha256 HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n", host, spliceSize)
	if _, err := io.CopyN(c, testutil.RandReader(12), spliceSize); err != nil {
		t.Fatal(err)
	}
	if resp, err = http.ReadResponse(br, nil); err != nil {
		t.Fatal(err)
	}
	if got, want := readBody(t, resp.Body), wantSum(spliceSize, 12); got != want {
		t.Errorf("upload through the tunnel: server received %s, want %s", got, want)
	}
}

// rawServer accepts connections on 127.0.0.1 and runs serve on each in its own goroutine.
func rawServer(t *testing.T, serve func(net.Conn)) uint16 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			serve(c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

// TestSpliceServerClosesMidBody: the destination promises more than it sends and closes.
// The client must see a short body and the connection end, never a complete one or a hang.
func TestSpliceServerClosesMidBody(t *testing.T) {
	const promised, sent = spliceSize, 3 << 20
	port := rawServer(t, func(c net.Conn) {
		defer c.Close()
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", promised)
		io.CopyN(c, testutil.RandReader(4), sent)
	})
	e := startEnv(t, []policy.Rule{cidrRule(port)}, fakeResolver{}, Config{})
	resp, _, _ := rawExchange(t, e, fmt.Sprintf("GET http://127.0.0.1:%d/ HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n", port, port))
	n, err := io.Copy(io.Discard, resp.Body)
	if !errors.Is(err, io.ErrUnexpectedEOF) || n >= promised {
		t.Errorf("read %d of %d promised bytes, error %v; want a short body and io.ErrUnexpectedEOF", n, promised, err)
	}
	_, ev := e.events.nth(t, 1)
	if ev.Error == "" {
		t.Errorf("event has no error for a body cut short: %+v", ev)
	}
}

// TestSpliceClientHalfClose: a client that sends its request and half-closes its side of a
// tunnel still gets the whole answer, which the destination sends only after seeing the
// end of what the client sent.
func TestSpliceClientHalfClose(t *testing.T) {
	port := rawServer(t, func(c net.Conn) {
		go func() {
			defer c.Close()
			h := sha256.New()
			n, _ := io.Copy(h, c) // until the client's half-close arrives
			fmt.Fprintf(c, "%d %s", n, hex.EncodeToString(h.Sum(nil)))
			io.CopyN(c, testutil.RandReader(8), spliceSize)
		}()
	})
	e := startEnv(t, []policy.Rule{cidrRule(port)}, fakeResolver{}, Config{})
	hp := "127.0.0.1:" + strconv.Itoa(int(port))
	resp, c, br := rawExchange(t, e, "CONNECT "+hp+" HTTP/1.1\r\nHost: "+hp+"\r\n\r\n")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT: status %d", resp.StatusCode)
	}
	if _, err := io.CopyN(c, testutil.RandReader(6), spliceSize); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	want := wantSum(spliceSize, 6)
	got := make([]byte, len(want))
	if _, err := io.ReadFull(br, got); err != nil || string(got) != want {
		t.Fatalf("destination received %q (%v), want %q", got, err, want)
	}
	if got, want := sha256Hex(t, br), wantSum(spliceSize, 8); got != want {
		t.Errorf("after the half-close the client got %s, want %s", got, want)
	}
}

// dialedAddrPort reports whether the proxy dialled any address on port.
func (e *env) dialedAddrPort(port uint16) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, ap := range e.dialed {
		if ap.Port() == port {
			return true
		}
	}
	return false
}
