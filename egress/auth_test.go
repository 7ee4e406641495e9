package egress

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/cordonhq/cordon/egress/policy"
	"github.com/cordonhq/cordon/internal/event"
)

// startTokenProxy serves a proxy requiring token on a loopback TCP port, as the
// seatbelt backend does, and returns its address.
func startTokenProxy(t *testing.T, rules []policy.Rule, token string) (string, *recorder) {
	t.Helper()
	pol, err := policy.New(rules)
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	p, err := New(Config{Policy: pol, Events: rec, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Serve(context.Background(), ln) }()
	t.Cleanup(func() {
		p.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String(), rec
}

// TestTokenHTTP: with a token, a request through the proxy that carries it (as the
// password of the proxy URL) is served, one without it or with another is answered 407
// and logged as a denial, and the token never reaches the destination.
func TestTokenHTTP(t *testing.T) {
	plain, _ := servers(t)
	const token = "per-run-secret"
	addr, rec := startTokenProxy(t, []policy.Rule{cidrRule(portOf(t, plain.URL))}, token)
	get := func(user *url.Userinfo) (int, string) {
		tr := &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: addr, User: user})}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Get(plain.URL + "/headers")
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, readBody(t, resp.Body)
	}
	code, body := get(url.UserPassword("cordon", token))
	if code != http.StatusOK {
		t.Fatalf("with the token: %d %s", code, body)
	}
	if typ, ev := rec.nth(t, 1); typ != event.NetAllow {
		t.Errorf("with the token: event %s %+v", typ, ev)
	}
	for i, user := range []*url.Userinfo{nil, url.UserPassword("cordon", "wrong"), url.User(token)} {
		if code, body := get(user); code != http.StatusProxyAuthRequired {
			t.Errorf("credentials %v: %d %s; want 407", user, code, body)
		}
		typ, ev := rec.nth(t, 2+i)
		wantEvent(t, typ, ev, event.NetDeny, event.NetBody{Proto: protoHTTP, Reason: reasonAuth, Category: policy.Denied.String()})
	}
}

// TestTokenSOCKS: a SOCKS5 client must authenticate with the token (RFC 1929); one that
// offers no authentication is refused the method, one with a wrong password the request.
func TestTokenSOCKS(t *testing.T) {
	plain, _ := servers(t)
	port := portOf(t, plain.URL)
	const token = "per-run-secret"
	addr, rec := startTokenProxy(t, []policy.Rule{cidrRule(port)}, token)
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(30 * time.Second))
		return c
	}
	auth := func(pass string) []byte {
		return append(append([]byte{1, 6}, "cordon"...), append([]byte{byte(len(pass))}, pass...)...)
	}

	// A refusal is recorded before it is answered (TestRefusalRecordedBeforeAnswer);
	// each is still awaited, so a failure names the attempt whose event went missing.
	c := dial()
	if got := exchange(t, c, []byte{5, 1, 0}, 2); got[1] != socksNoMethod {
		t.Errorf("no-auth offer: method %x; want ff", got[1])
	}
	c.Close()
	rec.wait(t, 1)
	c = dial()
	exchange(t, c, []byte{5, 1, 2}, 2)
	if got := exchange(t, c, auth("wrong"), 2); got[1] == 0 {
		t.Error("a wrong password was accepted")
	}
	c.Close()
	rec.wait(t, 2)
	c = dial()
	if got := exchange(t, c, []byte{5, 2, 0, 2}, 2); got[1] != socksUserPass {
		t.Fatalf("offer of both: method %x; want 02", got[1])
	}
	if got := exchange(t, c, auth(token), 2); got[1] != 0 {
		t.Fatalf("the token was refused: status %x", got[1])
	}
	req := append([]byte{5, socksCmdConnect, 0}, socksIPv4("127.0.0.1")...)
	if got := exchange(t, c, append(req, byte(port>>8), byte(port)), 10); got[1] != socksOK {
		t.Errorf("connect with the token: reply %s", socksReplyName(got[1]))
	}
	c.Close() // the tunnel's event comes when it ends
	for i := 1; i <= 2; i++ {
		typ, ev := rec.nth(t, i)
		wantEvent(t, typ, ev, event.NetDeny, event.NetBody{Proto: protoSOCKS, Category: policy.Denied.String()})
	}
	if typ, ev := rec.nth(t, 3); typ != event.NetAllow {
		t.Errorf("with the token: event %s %+v", typ, ev)
	}
}
