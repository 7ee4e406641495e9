package egress

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cordonhq/cordon/egress/policy"
	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/internal/testutil"
)

func TestHTTPAllowedAndEvent(t *testing.T) {
	plain, tlsSrv := servers(t)
	hp, sp := portOf(t, plain.URL), portOf(t, tlsSrv.URL)
	e := startEnv(t, []policy.Rule{cidrRule(hp, sp)}, fakeResolver{}, Config{})
	c := proxyClient(t, e, tlsSrv)

	resp, err := c.Get(plain.URL + "/hello")
	if err != nil {
		t.Fatal(err)
	}
	if body := readBody(t, resp.Body); resp.StatusCode != 200 || body != "hello\n" {
		t.Fatalf("got %d %q; want 200 \"hello\\n\"", resp.StatusCode, body)
	}
	rule := cidrRule(hp, sp)
	pol, _ := policy.New([]policy.Rule{rule})
	typ, ev := e.events.nth(t, 1)
	wantEvent(t, typ, ev, event.NetAllow, event.NetBody{
		Host: "127.0.0.1", Port: hp, Addr: "127.0.0.1:" + strconv.Itoa(int(hp)), Proto: protoHTTP,
		Rule: pol.Rules()[0].String(), BytesDown: 6,
	})
	if ev.Why != "test servers" {
		t.Errorf("why %q, want %q", ev.Why, "test servers")
	}

	resp, err = c.Get(tlsSrv.URL + "/hello")
	if err != nil {
		t.Fatal(err)
	}
	if body := readBody(t, resp.Body); body != "hello\n" {
		t.Fatalf("https body %q", body)
	}
	c.CloseIdleConnections() // the tunnel reports when it ends
	typ, ev = e.events.nth(t, 2)
	wantEvent(t, typ, ev, event.NetAllow, event.NetBody{Host: "127.0.0.1", Port: sp, Proto: protoConnect})
}

func TestHTTPKeepAliveOneEventPerRequest(t *testing.T) {
	plain, _ := servers(t)
	hp := portOf(t, plain.URL)
	e := startEnv(t, []policy.Rule{cidrRule(hp)}, fakeResolver{}, Config{})
	c := proxyClient(t, e, nil)
	var conns sync.Map
	for i := range 5 {
		req, _ := http.NewRequest("GET", plain.URL+"/hello", nil)
		req = req.WithContext(httptraceConn(req.Context(), &conns))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		readBody(t, resp.Body)
	}
	e.events.wait(t, 5)
	n := 0
	conns.Range(func(_, _ any) bool { n++; return true })
	if n != 1 {
		t.Errorf("client used %d connections to the proxy, want 1 (keep-alive)", n)
	}
}

// deniedCase is a request TestDenied sends, and how the proxy must refuse it.
type deniedCase struct {
	name     string
	req      string
	hostport string // in the 403 body
	reason   string // exact reason; "" to check only the prefix
	proto    string
}

// deniedEnv starts the proxy for TestDenied: cidr rules for the test servers, host
// rules whose names resolve (through a fake resolver) to private, loopback and
// metadata addresses. It returns ph, the port of the plain server, and po, a port no
// rule allows.
func deniedEnv(t *testing.T) (e *env, ph, po string) {
	t.Helper()
	plain, tlsSrv := servers(t)
	hp, sp := portOf(t, plain.URL), portOf(t, tlsSrv.URL)
	other := freePort(t)
	res := fakeResolver{
		"internal.test": addrs("10.0.0.5"),
		"loop.test":     addrs("127.0.0.1"),
		"meta.test":     addrs("169.254.169.254"),
		"mixed.test":    addrs("10.0.0.5", "127.0.0.1"),
	}
	e = startEnv(t, []policy.Rule{
		cidrRule(hp, sp),
		{Host: "allowed.com", Ports: []uint16{80, 443}},
		{Host: "internal.test", Ports: []uint16{80, 443}},
		{Host: "loop.test", Ports: []uint16{other}},
		{Host: "meta.test", Ports: []uint16{80}},
	}, res, Config{})
	ph = strconv.Itoa(int(hp))
	po = strconv.Itoa(int(other))
	return e, ph, po
}

// deniedCases are the requests of TestDenied, for the ports deniedEnv returns.
func deniedCases(ph, po string) []deniedCase {
	return []deniedCase{
		{"other port", "GET http://127.0.0.1:" + po + "/ HTTP/1.1\r\nHost: 127.0.0.1:" + po + "\r\n\r\n",
			"127.0.0.1:" + po, "no rule allows address 127.0.0.1 on port " + po, protoHTTP},
		{"connect other port", "CONNECT 127.0.0.1:" + po + " HTTP/1.1\r\nHost: 127.0.0.1:" + po + "\r\n\r\n",
			"127.0.0.1:" + po, "no rule allows address 127.0.0.1 on port " + po, protoConnect},
		{"unlisted name", "CONNECT evil.com:443 HTTP/1.1\r\n\r\n", "evil.com:443", `no rule allows host "evil.com"`, protoConnect},
		{"suffix", "CONNECT allowed.com.evil.com:443 HTTP/1.1\r\n\r\n", "allowed.com.evil.com:443",
			`no rule allows host "allowed.com.evil.com"`, protoConnect},
		{"glued", "CONNECT evilallowed.com:443 HTTP/1.1\r\n\r\n", "evilallowed.com:443", `no rule allows host "evilallowed.com"`, protoConnect},
		{"userinfo connect", "CONNECT allowed.com@evil.com:443 HTTP/1.1\r\n\r\n", "allowed.com@evil.com:443",
			`malformed host "allowed.com@evil.com": userinfo is not allowed`, protoConnect},
		{"userinfo get", "GET http://allowed.com@evil.com/ HTTP/1.1\r\nHost: evil.com\r\n\r\n", "", "", protoHTTP},
		{"fragment", "CONNECT evil.com#.allowed.com:443 HTTP/1.1\r\n\r\n", "", "", protoHTTP}, // 400: net/http rejects it
		{"hex ip", "CONNECT 0x7f.1:" + ph + " HTTP/1.1\r\n\r\n", "0x7f.1:" + ph,
			`malformed host "0x7f.1": not a canonical ipv4 address`, protoConnect},
		{"decimal ip", "GET http://2130706433:" + ph + "/ HTTP/1.1\r\nHost: 2130706433:" + ph + "\r\n\r\n", "2130706433:" + ph, "", protoHTTP},
		{"octal ip", "CONNECT 0177.0.0.1:" + ph + " HTTP/1.1\r\n\r\n", "0177.0.0.1:" + ph, "", protoConnect},
		{"short ip", "CONNECT 127.1:" + ph + " HTTP/1.1\r\n\r\n", "127.1:" + ph, "", protoConnect},
		{"host header mismatch", "GET http://127.0.0.1:" + ph + "/hello HTTP/1.1\r\nHost: evil.com\r\n\r\n",
			"127.0.0.1:" + ph, `host header "evil.com" does not match request target 127.0.0.1:` + ph, protoHTTP},
		{"host header port mismatch", "GET http://127.0.0.1:" + ph + "/hello HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n",
			"127.0.0.1:" + ph, "", protoHTTP},
		{"missing host header", "GET http://127.0.0.1:" + ph + "/hello HTTP/1.1\r\n\r\n", "127.0.0.1:" + ph,
			"request needs exactly one host header", protoHTTP},
		{"private resolution", "GET http://internal.test/ HTTP/1.1\r\nHost: internal.test\r\n\r\n", "internal.test:80",
			"address 10.0.0.5 is private and no cidr rule names it", protoHTTP},
		{"private resolution connect", "CONNECT internal.test:443 HTTP/1.1\r\n\r\n", "internal.test:443",
			"address 10.0.0.5 is private and no cidr rule names it", protoConnect},
		{"loopback resolution", "CONNECT loop.test:" + po + " HTTP/1.1\r\n\r\n", "loop.test:" + po,
			"address 127.0.0.1 is loopback and no cidr rule names it on port " + po, protoConnect},
		{"metadata resolution", "GET http://meta.test/ HTTP/1.1\r\nHost: meta.test\r\n\r\n", "meta.test:80",
			"address 169.254.169.254 is link-local (cloud metadata) and no cidr rule names it", protoHTTP},
		{"metadata literal", "GET http://169.254.169.254/latest/meta-data/ HTTP/1.1\r\nHost: 169.254.169.254\r\n\r\n",
			"169.254.169.254:80", "address 169.254.169.254 is link-local (cloud metadata) and no cidr rule names it", protoHTTP},
		{"mapped literal", "CONNECT [::ffff:127.0.0.1]:" + ph + " HTTP/1.1\r\n\r\n", "[::ffff:127.0.0.1]:" + ph,
			"address ::ffff:127.0.0.1 is ipv4-mapped and no cidr rule names it", protoConnect},
		{"https scheme", "GET https://127.0.0.1:" + ph + "/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", "", "https:// requests must use CONNECT", protoHTTP},
	}
}

// checkDenied sends tt and checks the 403 (or, for "fragment", the 400 of net/http),
// its body, and the n-th event.
func checkDenied(t *testing.T, e *env, n int, tt deniedCase) {
	resp, _, _ := rawExchange(t, e, tt.req)
	body := readBody(t, resp.Body)
	if tt.name == "fragment" && resp.StatusCode == http.StatusBadRequest {
		e.events.nth(t, n)
		return
	}
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("status %d body %q, want 403", resp.StatusCode, body)
	}
	if tt.hostport != "" && tt.reason != "" {
		// The rule itself is checked by TestDenialText; here, that the body shows the header's.
		if want := denyBody(tt.hostport, tt.reason, resp.Header.Values("X-Cordon-Allow-Rule")...); body != want {
			t.Errorf("body %q\nwant %q", body, want)
		}
	} else if want := "cordon: egress to " + tt.hostport; !strings.HasPrefix(body, want) || !strings.HasSuffix(body, ")\n") {
		t.Errorf("body %q, want it to start with %q", body, want)
	}
	typ, ev := e.events.nth(t, n)
	wantEvent(t, typ, ev, event.NetDeny, event.NetBody{Proto: tt.proto, Reason: tt.reason})
}

func TestDenied(t *testing.T) {
	e, ph, po := deniedEnv(t)
	for i, tt := range deniedCases(ph, po) {
		t.Run(tt.name, func(t *testing.T) { checkDenied(t, e, i+1, tt) })
	}
	for _, a := range addrs("10.0.0.5", "169.254.169.254") {
		if e.dialedAddr(a) {
			t.Errorf("proxy dialled %s", a)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.dialed) != 0 {
		t.Errorf("denied requests dialled %v", e.dialed)
	}
}

func TestSNI(t *testing.T) {
	_, tlsSrv := servers(t)
	sp := portOf(t, tlsSrv.URL)
	res := fakeResolver{"example.com": addrs("127.0.0.1"), "other.test": addrs("127.0.0.1")}
	e := startEnv(t, []policy.Rule{cidrRule(sp)}, res, Config{})
	pool := x509.NewCertPool()
	pool.AddCert(tlsSrv.Certificate())
	tests := []struct {
		name       string
		connect    string
		serverName string
		wantErr    bool
		reason     string
	}{
		{"name matches", "example.com", "example.com", false, ""},
		{"name case differs", "EXAMPLE.com", "example.com", false, ""},
		{"ip literal no sni", "127.0.0.1", "", false, ""},
		{"name differs", "other.test", "example.com", true, `tls server name "example.com" does not match host "other.test"`},
		{"ip literal with sni", "127.0.0.1", "example.com", true, `tls server name "example.com" does not match host "127.0.0.1"`},
		{"name without sni", "example.com", "", true, `tls client hello names no server; host "example.com" needs it`},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := net.JoinHostPort(tt.connect, strconv.Itoa(int(sp)))
			resp, c, br := rawExchange(t, e, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
			if resp.StatusCode != 200 {
				t.Fatalf("CONNECT status %d", resp.StatusCode)
			}
			cfg := &tls.Config{RootCAs: pool, ServerName: tt.serverName}
			if tt.serverName == "" {
				cfg.ServerName, cfg.InsecureSkipVerify = "", true // Go sends no SNI for an empty name
			}
			tc := tls.Client(&bufConn{Conn: c, r: br}, cfg)
			tc.SetDeadline(time.Now().Add(10 * time.Second))
			err := tc.Handshake()
			if tt.wantErr {
				if err == nil {
					t.Fatalf("handshake succeeded; want the tunnel refused")
				}
				if !strings.Contains(err.Error(), "tls: access denied") {
					t.Errorf("handshake error %q; want the proxy's access_denied alert", err)
				}
			} else if err != nil {
				t.Fatalf("handshake: %v", err)
			} else {
				io.WriteString(tc, "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
				b, _ := io.ReadAll(tc)
				if !bytes.HasSuffix(b, []byte("hello\n")) {
					t.Errorf("response %q", b)
				}
			}
			tc.Close()
			typ, ev := e.events.nth(t, i+1)
			if tt.wantErr {
				wantEvent(t, typ, ev, event.NetDeny, event.NetBody{Proto: protoConnect, Reason: tt.reason, Addr: "127.0.0.1:" + strconv.Itoa(int(sp))})
				if ev.Category != policy.ServerNameMismatch.String() {
					t.Errorf("category %q; want %q", ev.Category, policy.ServerNameMismatch)
				}
			} else {
				wantEvent(t, typ, ev, event.NetAllow, event.NetBody{Proto: protoConnect})
			}
		})
	}
}

// bufConn reads through r, which may hold bytes already read from Conn.
type bufConn struct {
	net.Conn
	r io.Reader
}

func (c *bufConn) Read(b []byte) (int, error) { return c.r.Read(b) }

func TestPort443RequiresTLS(t *testing.T) {
	// Port 443 is real here: listen on a random 127.x address so nothing else collides.
	ln, err := net.Listen("tcp", fmt.Sprintf("127.%d.%d.%d:443", 1+time.Now().UnixNano()%200, 7, 9))
	testutil.Require(t, err == nil, fmt.Sprintf("listening on port 443 (needs root or CAP_NET_BIND_SERVICE): %v", err))
	srv := &http.Server{Handler: testHandler(), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	addr := ln.Addr().(*net.TCPAddr)
	e := startEnv(t, []policy.Rule{cidrRule(443)}, fakeResolver{}, Config{})
	resp, c, br := rawExchange(t, e, "CONNECT "+addr.String()+" HTTP/1.1\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT status %d", resp.StatusCode)
	}
	io.WriteString(c, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if b, err := io.ReadAll(br); len(b) != 0 || err != nil {
		t.Errorf("plain HTTP on port 443 got %q, %v; want the tunnel closed", b, err)
	}
	typ, ev := e.events.nth(t, 1)
	wantEvent(t, typ, ev, event.NetDeny, event.NetBody{Proto: protoConnect, Port: 443, Reason: "expected a tls client hello"})
}

func TestHeadersStripped(t *testing.T) {
	plain, _ := servers(t)
	hp := portOf(t, plain.URL)
	e := startEnv(t, []policy.Rule{cidrRule(hp)}, fakeResolver{}, Config{})
	target := "127.0.0.1:" + strconv.Itoa(int(hp))
	resp, _, _ := rawExchange(t, e, "GET http://"+target+"/headers HTTP/1.1\r\nHost: "+target+"\r\n"+
		"Proxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\nConnection: close, X-Hop\r\n"+
		"X-Hop: secret\r\nKeep-Alive: 5\r\nX-End: kept\r\nTe: trailers\r\n\r\n")
	body := readBody(t, resp.Body)
	for _, bad := range []string{"Proxy-", "X-Hop", "Keep-Alive", "Te:", "Go-Http-Client"} {
		if strings.Contains(body, bad) {
			t.Errorf("upstream saw %q in headers:\n%s", bad, body)
		}
	}
	if !strings.Contains(body, "X-End: kept") {
		t.Errorf("end-to-end header lost:\n%s", body)
	}
}

func TestHostHeaderNormalised(t *testing.T) {
	plain, _ := servers(t)
	hp := portOf(t, plain.URL)
	e := startEnv(t, []policy.Rule{cidrRule(hp)}, fakeResolver{"example.com": addrs("127.0.0.1")}, Config{})
	target := "Example.COM.:" + strconv.Itoa(int(hp))
	resp, _, _ := rawExchange(t, e, "GET http://"+target+"/host HTTP/1.1\r\nHost: example.com:"+strconv.Itoa(int(hp))+"\r\n\r\n")
	if body := readBody(t, resp.Body); body != "example.com:"+strconv.Itoa(int(hp)) {
		t.Errorf("upstream Host %q", body)
	}
}

func TestSOCKS5(t *testing.T) {
	plain, _ := servers(t)
	hp := portOf(t, plain.URL)
	res := fakeResolver{"example.com": addrs("127.0.0.1"), "internal.test": addrs("10.0.0.5")}
	e := startEnv(t, []policy.Rule{cidrRule(hp), {Host: "internal.test", Ports: []uint16{hp}}}, res, Config{})
	tests := []struct {
		name   string
		cmd    byte
		addr   []byte
		port   uint16
		reply  byte
		reason string
	}{
		{"domain allowed", 1, socksName("example.com"), hp, socksOK, ""},
		{"ipv4 allowed", 1, socksIPv4("127.0.0.1"), hp, socksOK, ""},
		{"ipv6 loopback denied", 1, append([]byte{4}, net.IPv6loopback...), hp, socksNotAllowed, "address ::1 is loopback"},
		{"other port", 1, socksIPv4("127.0.0.1"), hp + 1, socksNotAllowed, "no rule allows address 127.0.0.1 on port"},
		{"private resolution", 1, socksName("internal.test"), hp, socksNotAllowed, "address 10.0.0.5 is private"},
		{"noncanonical name", 1, socksName("127.1"), hp, socksNotAllowed, "not a canonical ipv4 address"},
		{"userinfo name", 1, socksName("a@example.com"), hp, socksNotAllowed, "userinfo"},
		{"unresolvable", 1, socksName("nowhere.test"), hp, socksHostUnreachable, `cannot resolve host "nowhere.test"`},
		{"bind refused", 2, socksIPv4("127.0.0.1"), hp, socksCmdUnsupported, "command 2 is not supported"},
		{"udp refused", 3, socksIPv4("127.0.0.1"), hp, socksCmdUnsupported, "command 3 is not supported"},
		{"bad atyp", 1, []byte{9, 1, 2, 3, 4}, hp, socksAtypUnsupported, "address type 9"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", e.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			got := socksConnect(t, c, tt.cmd, tt.addr, tt.port)
			if got != tt.reply {
				t.Fatalf("reply %d (%s), want %d (%s)", got, socksReplyName(got), tt.reply, socksReplyName(tt.reply))
			}
			if tt.reply == socksOK {
				io.WriteString(c, "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				b, _ := io.ReadAll(c)
				if !bytes.HasSuffix(b, []byte("hello\n")) {
					t.Errorf("response %q", b)
				}
				c.Close() // the tunnel reports when both directions have ended
				ty, ev := e.events.nth(t, i+1)
				wantEvent(t, ty, ev, event.NetAllow, event.NetBody{Proto: protoSOCKS, Addr: "127.0.0.1:" + strconv.Itoa(int(hp))})
				return
			}
			ty, ev := e.events.nth(t, i+1)
			wantEvent(t, ty, ev, event.NetDeny, event.NetBody{Proto: protoSOCKS, Reason: tt.reason})
		})
	}
	if e.dialedAddr(addrs("10.0.0.5")[0]) {
		t.Errorf("proxy dialled 10.0.0.5")
	}
}

func TestSOCKS5NoAcceptableMethod(t *testing.T) {
	e := startEnv(t, nil, fakeResolver{}, Config{})
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	c.Write([]byte{5, 1, 2}) // username/password only
	var sel [2]byte
	if _, err := io.ReadFull(c, sel[:]); err != nil || sel != [2]byte{5, 0xff} {
		t.Fatalf("method selection %v, %v; want [5 255]", sel, err)
	}
	typ, ev := e.events.nth(t, 1)
	wantEvent(t, typ, ev, event.NetDeny, event.NetBody{Proto: protoSOCKS, Reason: "no supported authentication method"})
}

func TestLargeTransfers(t *testing.T) {
	const size = 64 << 20
	plain, tlsSrv := servers(t)
	hp, sp := portOf(t, plain.URL), portOf(t, tlsSrv.URL)
	e := startEnv(t, []policy.Rule{cidrRule(hp, sp)}, fakeResolver{"example.com": addrs("127.0.0.1")}, Config{})
	c := proxyClient(t, e, tlsSrv)
	for _, base := range []string{plain.URL, "https://example.com:" + strconv.Itoa(int(sp))} {
		t.Run("download "+base, func(t *testing.T) {
			resp, err := c.Get(base + "/bytes?n=" + strconv.Itoa(size) + "&seed=7")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			h := sha256Hex(t, resp.Body)
			if want := strconv.Itoa(size) + " " + testutil.SumOf(size, 7); h != want {
				t.Errorf("download: got %s, want %s", h, want)
			}
		})
		t.Run("upload "+base, func(t *testing.T) {
			resp, err := c.Post(base+"/sha256", "application/octet-stream", io.LimitReader(testutil.RandReader(9), size))
			if err != nil {
				t.Fatal(err)
			}
			if body, want := readBody(t, resp.Body), strconv.Itoa(size)+" "+testutil.SumOf(size, 9); body != want {
				t.Errorf("upload: got %q, want %q", body, want)
			}
		})
	}
	evs := e.events.wait(t, 2) // the tunnel reports when it closes, after the test
	if ev := evs[0].Body.(event.NetBody); ev.BytesDown != size {
		t.Errorf("download event bytes_down %d, want %d", ev.BytesDown, size)
	}
	if ev := evs[1].Body.(event.NetBody); ev.BytesUp != size {
		t.Errorf("upload event bytes_up %d, want %d", ev.BytesUp, size)
	}
}

func TestConcurrentConnections(t *testing.T) {
	plain, tlsSrv := servers(t)
	hp, sp := portOf(t, plain.URL), portOf(t, tlsSrv.URL)
	e := startEnv(t, []policy.Rule{cidrRule(hp, sp)}, fakeResolver{}, Config{})
	const n = 100
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			c := proxyClient(t, e, tlsSrv)
			c.Transport.(*http.Transport).DisableKeepAlives = true
			u := plain.URL
			if i%2 == 1 {
				u = tlsSrv.URL
			}
			resp, err := c.Get(u + "/bytes?n=100000&seed=" + strconv.Itoa(i))
			if err != nil {
				errs <- err
				return
			}
			if got, want := sha256Hex(t, resp.Body), "100000 "+testutil.SumOf(100000, uint64(i)); got != want {
				errs <- fmt.Errorf("connection %d: got %s", i, got)
			}
			resp.Body.Close()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, ev := range e.events.wait(t, n) {
		if ev.Type != event.NetAllow {
			t.Errorf("event %+v", ev)
		}
	}
}

func TestMaxConns(t *testing.T) {
	plain, _ := servers(t)
	hp := portOf(t, plain.URL)
	e := startEnv(t, []policy.Rule{cidrRule(hp)}, fakeResolver{}, Config{MaxConns: 2})
	target := "127.0.0.1:" + strconv.Itoa(int(hp))
	// Two tunnels hold both slots.
	for range 2 {
		resp, _, _ := rawExchange(t, e, "CONNECT "+target+" HTTP/1.1\r\n\r\n")
		if resp.StatusCode != 200 {
			t.Fatalf("CONNECT status %d", resp.StatusCode)
		}
	}
	resp, _, _ := rawExchange(t, e, "GET http://"+target+"/hello HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
	if body := readBody(t, resp.Body); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "too many connections (limit 2)") {
		t.Errorf("third connection: %d %q, want 503", resp.StatusCode, body)
	}
	typ, ev := e.events.nth(t, 1)
	wantEvent(t, typ, ev, event.NetDeny, event.NetBody{Proto: protoHTTP, Host: "127.0.0.1", Port: hp, Reason: "too many connections (limit 2)"})

	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := socksConnect(t, c, 1, socksIPv4("127.0.0.1"), hp); got != socksGeneralFailure {
		t.Errorf("socks reply %d (%s), want general failure", got, socksReplyName(got))
	}
	typ, ev = e.events.nth(t, 2)
	wantEvent(t, typ, ev, event.NetDeny, event.NetBody{Proto: protoSOCKS, Reason: "too many connections"})
}

func TestIdleTimeout(t *testing.T) {
	plain, _ := servers(t)
	hp := portOf(t, plain.URL)
	e := startEnv(t, []policy.Rule{cidrRule(hp)}, fakeResolver{}, Config{IdleTimeout: 300 * time.Millisecond})
	target := "127.0.0.1:" + strconv.Itoa(int(hp))
	resp, c, br := rawExchange(t, e, "CONNECT "+target+" HTTP/1.1\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT status %d", resp.StatusCode)
	}
	start := time.Now()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("idle tunnel read: %v, want EOF", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("idle tunnel closed after %s", d)
	}
	typ, ev := e.events.nth(t, 1)
	wantEvent(t, typ, ev, event.NetAllow, event.NetBody{Proto: protoConnect})
}

func TestSlowDownloadIsNotIdle(t *testing.T) {
	// The upload direction is silent while the download trickles: not idle.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		for range 8 {
			c.Write([]byte("x"))
			time.Sleep(100 * time.Millisecond)
		}
	}()
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	e := startEnv(t, []policy.Rule{cidrRule(port)}, fakeResolver{}, Config{IdleTimeout: 300 * time.Millisecond})
	resp, c, br := rawExchange(t, e, "CONNECT "+ln.Addr().String()+" HTTP/1.1\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT status %d", resp.StatusCode)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, _ := io.ReadAll(br)
	if string(b) != "xxxxxxxx" {
		t.Errorf("got %q, want 8 bytes", b)
	}
}

func TestCloseEndsEverything(t *testing.T) {
	plain, _ := servers(t)
	hp := portOf(t, plain.URL)
	pol, _ := policy.New([]policy.Rule{cidrRule(hp)})
	p, err := New(Config{Policy: pol, Resolver: fakeResolver{}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Serve(context.Background(), ln) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n", hp)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if resp, err := http.ReadResponse(bufioReader(c), nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	p.Close()
	if err := <-done; err != nil {
		t.Errorf("Serve after Close: %v", err)
	}
	if err := p.Serve(context.Background(), ln); err != ErrClosed {
		t.Errorf("Serve on a closed proxy: %v, want ErrClosed", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Errorf("tunnel still open after Close")
	}
}

func TestConfigValidate(t *testing.T) {
	if _, err := New(Config{MaxConns: -1, IdleTimeout: -1}); err == nil ||
		!strings.Contains(err.Error(), "max conns") || !strings.Contains(err.Error(), "idle timeout") {
		t.Errorf("New with negative limits: %v", err)
	}
}
