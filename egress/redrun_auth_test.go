package egress

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/egress/policy"
)

// Red-team attacks on the proxy token (auth.go): each must fail, for the right
// reason: a 407 (or a SOCKS5 refusal) and the request never forwarded.

const redToken = "red-run-token-5f3a"

// basic is a Basic Proxy-Authorization value for user and pass.
func basic(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

// redConn dials the proxy at addr with a deadline, closed at the test's end.
func redConn(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(30 * time.Second))
	return c, bufio.NewReader(c)
}

// send writes raw and reads one response (its body read whole).
func send(t *testing.T, c net.Conn, br *bufio.Reader, raw string) (*http.Response, string) {
	t.Helper()
	if raw != "" {
		if _, err := io.WriteString(c, raw); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the response to %q: %v", raw, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// wantClosed checks that the proxy closed the connection after a 407: no second
// request can follow on it.
func wantClosed(t *testing.T, br *bufio.Reader) {
	t.Helper()
	if _, err := br.ReadByte(); err == nil {
		t.Error("the connection stayed open after a 407")
	}
}

// noTokenIn fails if s holds the token in clear or in a Basic credential.
func noTokenIn(t *testing.T, what, s string) {
	t.Helper()
	for _, v := range []string{redToken, base64.StdEncoding.EncodeToString([]byte("cordon:" + redToken))} {
		if strings.Contains(s, v) {
			t.Errorf("%s holds the token (%q):\n%s", what, v, s)
		}
	}
}

// TestRedRunTokenKeepAlive: a connection authorised by its first request gains nothing
// for the next: a second (or pipelined) request without the token is answered 407 and
// the connection is closed; the token never reaches the destination.
func TestRedRunTokenKeepAlive(t *testing.T) {
	plain, _ := servers(t)
	addr, rec := startTokenProxy(t, []policy.Rule{cidrRule(portOf(t, plain.URL))}, redToken)
	get := "GET " + plain.URL + "/headers HTTP/1.1\r\nHost: " + strings.TrimPrefix(plain.URL, "http://") + "\r\n"

	c, br := redConn(t, addr)
	resp, body := send(t, c, br, get+"Proxy-Authorization: "+basic("cordon", redToken)+"\r\n\r\n")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("with the token: %d %s", resp.StatusCode, body)
	}
	noTokenIn(t, "the destination's request headers", body)
	if resp, body := send(t, c, br, get+"\r\n"); resp.StatusCode != http.StatusProxyAuthRequired {
		t.Errorf("second request without the token: %d %s; want 407", resp.StatusCode, body)
	}
	wantClosed(t, br)

	// Pipelined: both requests in one write.
	c, br = redConn(t, addr)
	if _, err := io.WriteString(c, get+"Proxy-Authorization: "+basic("cordon", redToken)+"\r\n\r\n"+get+"\r\n"); err != nil {
		t.Fatal(err)
	}
	if resp, body := send(t, c, br, ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("pipelined, first: %d %s", resp.StatusCode, body)
	}
	if resp, body := send(t, c, br, ""); resp.StatusCode != http.StatusProxyAuthRequired {
		t.Errorf("pipelined, second without the token: %d %s; want 407", resp.StatusCode, body)
	}
	wantClosed(t, br)
	for _, e := range rec.wait(t, 4) {
		b, _ := json.Marshal(e)
		noTokenIn(t, "an event", string(b))
	}
}

// TestRedRunTokenForms: every way of presenting something other than the token as the
// password of a Basic credential is refused with 407, for origin-form, absolute-form
// and CONNECT requests alike, whatever the header's case or repetition.
func TestRedRunTokenForms(t *testing.T) {
	plain, _ := servers(t)
	hostport := strings.TrimPrefix(plain.URL, "http://")
	addr, rec := startTokenProxy(t, []policy.Rule{cidrRule(portOf(t, plain.URL))}, redToken)
	abs := "GET " + plain.URL + "/headers HTTP/1.1\r\nHost: " + hostport + "\r\n"
	origin := "GET /headers HTTP/1.1\r\nHost: " + hostport + "\r\n"
	connect := "CONNECT " + hostport + " HTTP/1.1\r\nHost: " + hostport + "\r\n"
	refused := []struct{ name, req string }{
		{"absolute-form, none", abs + "\r\n"},
		{"origin-form, none", origin + "\r\n"},
		{"CONNECT, none", connect + "\r\n"},
		{"CONNECT, wrong", connect + "Proxy-Authorization: " + basic("cordon", "x") + "\r\n\r\n"},
		{"token as the user", abs + "Proxy-Authorization: " + basic(redToken, "") + "\r\n\r\n"},
		{"token without a colon", abs + "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(redToken)) + "\r\n\r\n"},
		{"token plus a suffix", abs + "Proxy-Authorization: " + basic("cordon", redToken+"x") + "\r\n\r\n"},
		{"token prefix", abs + "Proxy-Authorization: " + basic("cordon", redToken[:len(redToken)-1]) + "\r\n\r\n"},
		{"password after a second colon", abs + "Proxy-Authorization: " + basic("cordon:x", redToken) + "\r\n\r\n"},
		{"Bearer", abs + "Proxy-Authorization: Bearer " + redToken + "\r\n\r\n"},
		{"raw token", abs + "Proxy-Authorization: " + redToken + "\r\n\r\n"},
		{"Authorization, not Proxy-", abs + "Authorization: " + basic("cordon", redToken) + "\r\n\r\n"},
		{"the token in the URL", "GET http://cordon:" + redToken + "@" + hostport + "/headers HTTP/1.1\r\nHost: " + hostport + "\r\n\r\n"},
		{"wrong first, right second", abs + "Proxy-Authorization: " + basic("cordon", "x") + "\r\nProxy-Authorization: " + basic("cordon", redToken) + "\r\n\r\n"},
		{"empty first, right second", abs + "Proxy-Authorization: \r\nProxy-Authorization: " + basic("cordon", redToken) + "\r\n\r\n"},
		{"both in one line", abs + "Proxy-Authorization: " + basic("cordon", "x") + ", " + basic("cordon", redToken) + "\r\n\r\n"},
		{"HTTP/1.0", "GET " + plain.URL + "/headers HTTP/1.0\r\n\r\n"},
	}
	for _, tc := range refused {
		c, br := redConn(t, addr)
		resp, body := send(t, c, br, tc.req)
		if resp.StatusCode != http.StatusProxyAuthRequired {
			t.Errorf("%s: %d %s; want 407", tc.name, resp.StatusCode, body)
		}
		wantClosed(t, br)
	}
	// The token itself, however its header is spelt: served, and not forwarded.
	served := []struct{ name, req string }{
		{"lower-case header and scheme", abs + "proxy-authorization: basic " + base64.StdEncoding.EncodeToString([]byte("cordon:"+redToken)) + "\r\n\r\n"},
		{"right first, wrong second", abs + "Proxy-Authorization: " + basic("cordon", redToken) + "\r\nProxy-Authorization: " + basic("cordon", "x") + "\r\n\r\n"},
		{"named hop-by-hop by Connection", abs + "Connection: Proxy-Authorization\r\nProxy-Authorization: " + basic("cordon", redToken) + "\r\n\r\n"},
	}
	for _, tc := range served {
		c, br := redConn(t, addr)
		resp, body := send(t, c, br, tc.req)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d %s; want 200", tc.name, resp.StatusCode, body)
		}
		noTokenIn(t, tc.name+": the destination's request headers", body)
		if strings.Contains(strings.ToLower(body), "proxy-") {
			t.Errorf("%s: a Proxy-* header reached the destination:\n%s", tc.name, body)
		}
	}
	for _, e := range rec.wait(t, len(refused)+len(served)) {
		b, _ := json.Marshal(e)
		noTokenIn(t, "an event", string(b))
	}
}

// TestRedRunTokenSOCKS: a SOCKS5 client cannot skip or fake the RFC 1929 exchange:
// sending the request where the authentication belongs, an empty or prefixed password,
// or an offer without username/password, is refused before any CONNECT is read.
func TestRedRunTokenSOCKS(t *testing.T) {
	plain, _ := servers(t)
	port := portOf(t, plain.URL)
	addr, _ := startTokenProxy(t, []policy.Rule{cidrRule(port)}, redToken)
	req := append(append([]byte{5, socksCmdConnect, 0}, socksIPv4("127.0.0.1")...), byte(port>>8), byte(port))
	auth := func(user, pass string) []byte {
		return append(append([]byte{1, byte(len(user))}, user...), append([]byte{byte(len(pass))}, pass...)...)
	}
	// open negotiates offer and returns the connection and the method chosen.
	open := func(offer ...byte) (net.Conn, *bufio.Reader, byte) {
		c, br := redConn(t, addr)
		if _, err := c.Write(append([]byte{5, byte(len(offer))}, offer...)); err != nil {
			t.Fatal(err)
		}
		var m [2]byte
		if _, err := io.ReadFull(br, m[:]); err != nil {
			t.Fatalf("offer %x: %v", offer, err)
		}
		return c, br, m[1]
	}
	// refusedAfter sends out and checks that no CONNECT success follows.
	refusedAfter := func(name string, c net.Conn, br *bufio.Reader, out []byte) {
		t.Helper()
		if _, err := c.Write(out); err != nil {
			return // closed already: refused
		}
		in, _ := io.ReadAll(br)
		if len(in) >= 2 && in[0] == socksAuthVersion && in[1] == 0 {
			t.Errorf("%s: authentication accepted: %x", name, in)
		}
		if len(in) >= 2 && in[0] == socksVersion && in[1] == socksOK {
			t.Errorf("%s: CONNECT succeeded: %x", name, in)
		}
	}
	for _, offer := range [][]byte{{}, {0}, {0, 1, 3, 0x80, 0xfe}} {
		c, br, m := open(offer...)
		if m != socksNoMethod {
			t.Errorf("offer %x: method %x; want ff", offer, m)
		}
		refusedAfter("after refused offer", c, br, req)
	}
	c, br, m := open(0, 2)
	if m != socksUserPass {
		t.Fatalf("offer of both: method %x; want 02", m)
	}
	refusedAfter("request in place of authentication", c, br, req)
	for _, a := range []struct{ name, user, pass string }{
		{"empty password", "cordon", ""},
		{"token as the user", redToken, ""},
		{"token prefix", "cordon", redToken[:5]},
		{"token plus a suffix", "cordon", redToken + "\x00"},
	} {
		c, br, _ := open(2)
		refusedAfter(a.name, c, br, append(auth(a.user, a.pass), req...))
	}
	// Version 5 in place of RFC 1929's version 1.
	c, br, _ = open(2)
	bad := auth("cordon", redToken)
	bad[0] = 5
	refusedAfter("authentication of version 5", c, br, append(bad, req...))
}

// TestRedRunNoTokenUnchanged: without a token (Linux: the proxy on a unix socket),
// requests need no credentials, a stray Proxy-Authorization is not forwarded, and a
// SOCKS5 client offering only username/password is refused the method, as before.
func TestRedRunNoTokenUnchanged(t *testing.T) {
	plain, _ := servers(t)
	addr, _ := startTokenProxy(t, []policy.Rule{cidrRule(portOf(t, plain.URL))}, "")
	hostport := strings.TrimPrefix(plain.URL, "http://")
	c, br := redConn(t, addr)
	resp, body := send(t, c, br, "GET "+plain.URL+"/headers HTTP/1.1\r\nHost: "+hostport+"\r\nProxy-Authorization: "+basic("cordon", redToken)+"\r\n\r\n")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("no token required: %d %s", resp.StatusCode, body)
	}
	noTokenIn(t, "the destination's request headers", body)
	c, br = redConn(t, addr)
	if _, err := c.Write([]byte{5, 1, 2}); err != nil {
		t.Fatal(err)
	}
	var m [2]byte
	if _, err := io.ReadFull(br, m[:]); err != nil || m[1] != socksNoMethod {
		t.Errorf("username/password only, no token: %x %v; want method ff", m, err)
	}
}
