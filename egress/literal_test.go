package egress

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"testing"

	"github.com/cordonhq/cordon/egress/policy"
	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/internal/testutil"
)

// TestIPv6Literal checks bracketed IPv6 destinations through every path: absolute-form
// HTTP, CONNECT and SOCKS5 with an IPv6 address.
func TestIPv6Literal(t *testing.T) {
	ln, err := net.Listen("tcp", "[::1]:0")
	testutil.Require(t, err == nil, fmt.Sprintf("an IPv6 loopback: %v", err))
	srv := &http.Server{Handler: testHandler()}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	ps := strconv.Itoa(int(port))
	e := startEnv(t, []policy.Rule{{CIDR: netip.MustParsePrefix("::1/128"), Ports: []uint16{port}}}, fakeResolver{}, Config{})

	resp, _, _ := rawExchange(t, e, "GET http://[::1]:"+ps+"/hello HTTP/1.1\r\nHost: [::1]:"+ps+"\r\nConnection: close\r\n\r\n")
	if body := readBody(t, resp.Body); resp.StatusCode != 200 || body != "hello\n" {
		t.Fatalf("absolute-form: %d %q", resp.StatusCode, body)
	}
	typ, ev := e.events.nth(t, 1)
	wantEvent(t, typ, ev, event.NetAllow, event.NetBody{Host: "::1", Port: port, Addr: "[::1]:" + ps, Rule: "::1/128:" + ps})

	resp, c, _ := rawExchange(t, e, "CONNECT [::1]:"+ps+" HTTP/1.1\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %d", resp.StatusCode)
	}
	c.Close()
	typ, ev = e.events.nth(t, 2)
	wantEvent(t, typ, ev, event.NetAllow, event.NetBody{Host: "::1", Proto: protoConnect})

	s, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := socksConnect(t, s, 1, append([]byte{4}, net.IPv6loopback...), port); got != socksOK {
		t.Fatalf("socks5 ipv6: reply %s", socksReplyName(got))
	}

	resp, _, _ = rawExchange(t, e, "CONNECT [::1]:"+strconv.Itoa(int(port)+1)+" HTTP/1.1\r\n\r\n")
	if body := readBody(t, resp.Body); resp.StatusCode != 403 ||
		body != denyBody("[::1]:"+strconv.Itoa(int(port)+1), "no rule allows address ::1 on port "+strconv.Itoa(int(port)+1),
			"network.allow: [{cidr: ::1/128, ports: ["+strconv.Itoa(int(port)+1)+"]}]") {
		t.Errorf("other port: %d %q", resp.StatusCode, body)
	}
}
