package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"testing"
	"time"
)

// interimServer is an HTTPS credential host that answers every request on a kept-alive
// connection with interims interim responses (a 100 Continue nobody asked for, then
// 103 Early Hints that echo the request's Authorization in a header and in a Link),
// then a final 200 whose body names the request's path.
func interimServer(t *testing.T, interims int) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, bw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		for {
			auth := r.Header.Get("Authorization")
			io.Copy(io.Discard, r.Body)
			bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
			if r.URL.Path == "/truncate" { // a piece of the value, which cannot be put back
				auth = auth[:min(len(auth), 24)]
			}
			for range interims - 1 {
				fmt.Fprintf(bw, "HTTP/1.1 103 Early Hints\r\nLink: </style.css?auth=%s>; rel=preload\r\nX-Echo: %s\r\n\r\n", auth, auth)
			}
			body := "response to " + r.URL.Path
			fmt.Fprintf(bw, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			if bw.Flush() != nil {
				return
			}
			if r, err = http.ReadRequest(bw.Reader); err != nil {
				return
			}
		}
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// TestInterceptedInterimResponses: on an intercepted, credential-injecting connection,
// a destination's interim (1xx) responses are scrubbed like final ones (the 103 that
// echoes the injected Authorization reaches the client with the placeholder, never
// the value), and each request gets its own final response on the kept-alive
// connection: the interim is not taken for the final, leaving the final to answer
// the next request.
func TestInterceptedInterimResponses(t *testing.T) {
	srv := interimServer(t, 3)
	e, ca := withPolicy(t, srv, nil)
	c := clientFor(t, e, ca.Certificate())
	c.Timeout = 10 * time.Second
	base := fmt.Sprintf("https://example.com:%d", portOf(t, srv.URL))
	var interim []string
	for i, path := range []string{"/one", "/two", "/three"} {
		reused := false
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused },
			Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
				var b strings.Builder
				http.Header(h).Write(&b)
				interim = append(interim, fmt.Sprintf("%d %s", code, b.String()))
				return nil
			},
		})
		req, _ := http.NewRequestWithContext(ctx, "GET", base+path, nil)
		req.Header.Set("Authorization", "Bearer "+testPlaceholder)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		body := readBody(t, resp.Body)
		if resp.StatusCode != 200 || body != "response to "+path {
			t.Errorf("GET %s: %d %q; want 200 %q (the responses are out of step with the requests)", path, resp.StatusCode, body, "response to "+path)
		}
		if i > 0 && !reused {
			t.Errorf("GET %s did not reuse the connection: the test proves nothing about keeping in step", path)
		}
	}
	if len(interim) == 0 {
		t.Fatal("no interim response reached the client: the 103 Early Hints were not relayed")
	}
	for _, s := range interim {
		if strings.Contains(s, testReal) {
			t.Errorf("an interim response handed the client the value: %s", s)
		}
		if strings.HasPrefix(s, "103 ") && !strings.Contains(s, testPlaceholder) {
			t.Errorf("a 103 lost its echo instead of getting the placeholder back: %s", s)
		}
	}
}

// interceptedExchange sends one request for path, with the placeholder in its
// Authorization, on a raw intercepted connection through e to srv, and returns every
// response the client reads up to the first final one (or the end of the connection).
func interceptedExchange(t *testing.T, e *env, ca *CA, srv *httptest.Server, path string) []*http.Response {
	t.Helper()
	port := portOf(t, srv.URL)
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(c, "CONNECT example.com:%d HTTP/1.1\r\nHost: example.com:%d\r\n\r\n", port, port)
	br := bufio.NewReader(c)
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v, %v", resp, err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Certificate())
	tc := tls.Client(&prefixConn{Conn: c, r: br}, &tls.Config{RootCAs: roots, ServerName: "example.com"})
	fmt.Fprintf(tc, "GET %s HTTP/1.1\r\nHost: example.com:%d\r\nAuthorization: Bearer %s\r\n\r\n", path, port, testPlaceholder)
	tbr := bufio.NewReader(tc)
	var out []*http.Response
	for {
		resp, err := http.ReadResponse(tbr, nil)
		if err != nil {
			return out
		}
		resp.Body.Close()
		out = append(out, resp)
		if resp.StatusCode/100 != 1 {
			return out
		}
	}
}

// prefixConn reads what r holds of a connection before the connection itself.
type prefixConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *prefixConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// TestInterceptedInterimResponsesBounded: a destination that sends interim responses
// without end gets a 502 after a few have been relayed, not a proxy that relays them
// for ever; and one whose interim response carries a piece of the value that cannot be
// put back is refused with a 502, that interim response not relayed.
func TestInterceptedInterimResponsesBounded(t *testing.T) {
	srv := interimServer(t, 1000)
	e, ca := withPolicy(t, srv, nil)
	got := interceptedExchange(t, e, ca, srv, "/flood")
	if len(got) == 0 || len(got) > maxInterim+1 || got[len(got)-1].StatusCode != http.StatusBadGateway {
		t.Errorf("%d responses to a destination's 1000 interim ones; want at most %d, the last a 502", len(got), maxInterim+1)
	}

	srv = interimServer(t, 2)
	e, ca = withPolicy(t, srv, nil)
	got = interceptedExchange(t, e, ca, srv, "/truncate")
	if len(got) != 1 || got[0].StatusCode != http.StatusBadGateway {
		t.Errorf("an interim response with a piece of the value: got %d responses (first %v); want one 502", len(got), got)
	}
	for _, r := range got {
		if strings.Contains(headText(r), testReal[:16]) {
			t.Errorf("a piece of the value reached the client: %s", headText(r))
		}
	}
}
