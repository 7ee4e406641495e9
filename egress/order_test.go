package egress

import (
	"crypto/tls"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/cordonhq/cordon/egress/policy"
	"github.com/cordonhq/cordon/internal/event"
)

// TestRefusalRecordedBeforeAnswer: every way the proxy refuses an attempt records the
// net.deny before the client can read the answer. A command that ends as soon as it is
// refused (curl on a 403, openssl on a TLS alert) then ends with the refusal already in
// the sink, which is where its result's "egress denied" lines come from. The recorder
// takes 30 ms per event, as a slow log might: were the answer written first, the client
// would read it before the event exists.
func TestRefusalRecordedBeforeAnswer(t *testing.T) {
	plain, tlsSrv := servers(t)
	pp, sp := portOf(t, plain.URL), portOf(t, tlsSrv.URL)
	res := fakeResolver{"example.com": addrs("127.0.0.1"), "other.test": addrs("127.0.0.1")}
	e := startEnv(t, []policy.Rule{cidrRule(sp)}, res, Config{})
	const slow = 30 * time.Millisecond
	e.events.slow.Store(int64(slow))
	dial := func(t *testing.T) net.Conn {
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(30 * time.Second))
		return c
	}
	cases := []struct {
		name    string
		refused func(t *testing.T) // returns once the client has read the refusal
	}{
		{"http 403", func(t *testing.T) {
			target := "127.0.0.1:" + strconv.Itoa(int(pp))
			resp, _, _ := rawExchange(t, e, "GET http://"+target+"/hello HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
			if resp.StatusCode != 403 {
				t.Fatalf("status %d; want 403", resp.StatusCode)
			}
		}},
		{"connect 403", func(t *testing.T) {
			resp, _, _ := rawExchange(t, e, "CONNECT evil.test:443 HTTP/1.1\r\nHost: evil.test:443\r\n\r\n")
			if resp.StatusCode != 403 {
				t.Fatalf("status %d; want 403", resp.StatusCode)
			}
		}},
		{"malformed request 400", func(t *testing.T) {
			resp, _, _ := rawExchange(t, e, "GET http://a b/ HTTP/1.1\r\n\r\n")
			if resp.StatusCode != 400 {
				t.Fatalf("status %d; want 400", resp.StatusCode)
			}
		}},
		{"tls server name alert", func(t *testing.T) {
			target := net.JoinHostPort("other.test", strconv.Itoa(int(sp)))
			resp, c, br := rawExchange(t, e, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
			if resp.StatusCode != 200 {
				t.Fatalf("CONNECT status %d", resp.StatusCode)
			}
			tc := tls.Client(&bufConn{Conn: c, r: br}, &tls.Config{ServerName: "example.com", InsecureSkipVerify: true})
			if err := tc.Handshake(); err == nil {
				t.Fatal("handshake succeeded; want the access_denied alert")
			}
		}},
		{"socks5 not allowed", func(t *testing.T) {
			if code := socksConnect(t, dial(t), 1, socksIPv4("127.0.0.1"), pp); code != socksNotAllowed {
				t.Fatalf("reply %d; want %d", code, socksNotAllowed)
			}
		}},
		{"socks5 command", func(t *testing.T) {
			if code := socksConnect(t, dial(t), 2, socksIPv4("127.0.0.1"), sp); code != socksCmdUnsupported {
				t.Fatalf("reply %d; want %d", code, socksCmdUnsupported)
			}
		}},
		{"socks5 method", func(t *testing.T) {
			if got := exchange(t, dial(t), []byte{5, 1, 2}, 2); got[1] != socksNoMethod {
				t.Fatalf("method %x; want ff", got[1])
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { refusedRecorded(t, e.events, c.refused) })
	}

	// With the run's token required: a request or a SOCKS5 password without it.
	addr, rec := startTokenProxy(t, []policy.Rule{cidrRule(pp)}, "per-run-secret")
	rec.slow.Store(int64(slow))
	t.Run("http 407", func(t *testing.T) {
		refusedRecorded(t, rec, func(t *testing.T) {
			resp, _, _ := rawExchange(t, &env{addr: addr}, "GET http://127.0.0.1:1/ HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n")
			if resp.StatusCode != 407 {
				t.Fatalf("status %d; want 407", resp.StatusCode)
			}
		})
	})
	t.Run("socks5 password", func(t *testing.T) {
		refusedRecorded(t, rec, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(30 * time.Second))
			exchange(t, c, []byte{5, 1, 2}, 2)
			if got := exchange(t, c, []byte{1, 1, 'u', 5, 'w', 'r', 'o', 'n', 'g'}, 2); got[1] == 0 {
				t.Fatal("a wrong password was accepted")
			}
		})
	})
}

// refusedRecorded runs refused, which returns once the client has read its refusal, and
// checks that exactly one net.deny was recorded by then, without waiting for it.
func refusedRecorded(t *testing.T, rec *recorder, refused func(t *testing.T)) {
	t.Helper()
	before := rec.count(event.NetDeny)
	refused(t)
	if got := rec.count(event.NetDeny); got != before+1 {
		t.Fatalf("the client read its refusal with %d new net.deny events recorded; want 1", got-before)
	}
}
