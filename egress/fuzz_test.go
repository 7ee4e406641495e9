package egress

import (
	"bufio"
	"bytes"
	"net"
	"net/http"
	"testing"
	"time"
)

// discardConn is a net.Conn whose writes vanish and whose deadlines do nothing.
type discardConn struct{ net.Conn }

func (discardConn) Write(b []byte) (int, error)      { return len(b), nil }
func (discardConn) SetReadDeadline(time.Time) error  { return nil }
func (discardConn) SetWriteDeadline(time.Time) error { return nil }

// FuzzReadSOCKS feeds arbitrary bytes to the SOCKS5 request parser: it must not panic,
// and a request it accepts has a port.
func FuzzReadSOCKS(f *testing.F) {
	f.Add([]byte{5, 1, 0, 5, 1, 0, 3, 11, 'e', 'x', 'a', 'm', 'p', 'l', 'e', '.', 'c', 'o', 'm', 1, 187})
	f.Add([]byte{5, 1, 0, 5, 1, 0, 1, 127, 0, 0, 1, 0, 80})
	f.Add([]byte{5, 1, 0, 5, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 80})
	f.Add([]byte{5, 0})
	f.Add([]byte{5, 1, 0, 5, 1, 0, 3, 0, 0, 80})
	f.Fuzz(func(t *testing.T, in []byte) {
		cc := newIdleConn(discardConn{}, time.Second)
		host, port, err := readSOCKS(cc, bufio.NewReader(bytes.NewReader(in)), "")
		if err == nil && port == 0 && len(in) < 7 {
			t.Fatalf("readSOCKS(%x) = %q, %d from a short input", in, host, port)
		}
	})
}

// FuzzHTTPHead checks that the head the proxy reads its Host header from and the request
// net/http parses agree: whenever net/http accepts a request, the proxy saw at most one
// Host header in the same bytes.
func FuzzHTTPHead(f *testing.F) {
	f.Add([]byte("GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n"))
	f.Add([]byte("GET http://a/ HTTP/1.1\nHost: a\nHost: b\n\n"))
	f.Add([]byte("CONNECT a:443 HTTP/1.1\r\n\r\n"))
	f.Add([]byte("GET http://a/ HTTP/1.1\r\nHost : b\r\n\r\n"))
	f.Add([]byte("GET http://a/ HTTP/1.1\r\n Host: b\r\nhost: a\r\n\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		br := bufio.NewReaderSize(bytes.NewReader(in), 4096)
		head, err := peekHead(br)
		if err != nil {
			return
		}
		hosts := headHosts(head)
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		if len(hosts) > 1 {
			t.Fatalf("net/http accepted %q, but the proxy saw host headers %q", in, hosts)
		}
		if req.Method != http.MethodConnect && len(hosts) == 0 && req.Host != "" && !req.URL.IsAbs() {
			t.Fatalf("net/http found host %q in %q, the proxy none", req.Host, in)
		}
	})
}
