package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/cordonhq/cordon/egress/policy"
)

// serveConnect handles a CONNECT request: decide, resolve, dial, answer 200, then relay.
// The destination is the raw request-target, split strictly; net/http's parse of it as a
// URL would silently drop userinfo ("allowed.com@evil.com:443").
func (p *Proxy) serveConnect(ctx context.Context, cc *idleConn, br *bufio.Reader, bw *bufio.Writer, req *http.Request) {
	a := newAttempt(protoConnect)
	host, port, err := policy.SplitHostPort(req.RequestURI)
	if err != nil {
		a.ev.Host = bound(req.RequestURI, 255)
		a.refused(policy.Malformed, err.Error())
		p.denyHTTP(cc, bw, a)
		return
	}
	p.openTunnel(ctx, cc, br, a, host, port, connectAnswers{p: p, cc: cc, bw: bw})
}

// tunnelAnswers is how a tunnel's protocol tells its client the outcome: CONNECT's
// status lines or SOCKS5's replies. Each of denied and unreachable records the
// attempt before it answers (doc.go).
type tunnelAnswers interface {
	// denied answers a destination the contract refused (a says why).
	denied(a *attempt)
	// unreachable answers one that was not reached (err, in a.ev.Error too); allowed
	// says the contract allowed it.
	unreachable(a *attempt, allowed bool, err error)
	// established tells the client its tunnel is open.
	established() error
}

// openTunnel decides host:port, dials it and answers through ans, then relays the
// tunnel (or intercepts it, for a host the run's credentials are injected into). It
// is CONNECT's and SOCKS5's one way from a parsed request to a tunnel.
func (p *Proxy) openTunnel(ctx context.Context, cc *idleConn, br *bufio.Reader, a *attempt, host string, port uint16, ans tunnelAnswers) {
	up, d, err := p.connect(ctx, host, port)
	a.target(host, port, d)
	switch {
	case up == nil && err == nil:
		a.deniedBy(d)
		ans.denied(a)
		return
	case up == nil:
		a.ev.Error = err.Error()
		if d.Verdict != policy.Allow {
			a.deniedBy(d)
		}
		ans.unreachable(a, d.Verdict == policy.Allow, err)
		return
	}
	a.allowedBy(d, up.RemoteAddr())
	creds := p.intercept[a.ev.Host]
	var upTLS *tls.Conn
	if len(creds) > 0 {
		if upTLS, err = p.upstreamTLS(ctx, up, a.ev.Host); err != nil {
			up.Close()
			a.refused(policy.Denied, "credential host failed tls verification: "+err.Error())
			ans.denied(a)
			return
		}
	}
	if err := ans.established(); err != nil {
		up.Close()
		a.ev.Error = err.Error()
		p.emitAttempt(a, true)
		return
	}
	if upTLS != nil {
		p.intercepted(ctx, cc, br, up, upTLS, a, creds)
		return
	}
	p.relay(ctx, cc, br, up, a)
}

// connectAnswers answers a CONNECT request with HTTP status lines.
type connectAnswers struct {
	p  *Proxy
	cc *idleConn
	bw *bufio.Writer
}

func (c connectAnswers) denied(a *attempt) { c.p.denyHTTP(c.cc, c.bw, a) }

func (c connectAnswers) unreachable(a *attempt, allowed bool, _ error) {
	c.p.unreachableHTTP(c.cc, c.bw, a, allowed)
}

func (c connectAnswers) established() error {
	_, _ = c.bw.WriteString("HTTP/1.1 200 Connection established\r\n\r\n")
	return c.bw.Flush()
}

// relay runs an allowed tunnel to up and reports it when it ends.
//
// If the client's first bytes are a TLS handshake record, on any port, relay reads the
// whole ClientHello (the bytes are replayed upstream, not lost) and refuses a server name
// other than the host that was checked, so a connection to an allowed address cannot
// carry TLS for another name (domain fronting). On port 443 the first bytes must be a
// ClientHello. A name-less ClientHello is accepted only for an IP-literal destination.
// The check runs inside the client-to-upstream copy, so protocols in which the server
// speaks first are not held up waiting for the client.
func (p *Proxy) relay(ctx context.Context, cc *idleConn, br *bufio.Reader, up *idleConn, a *attempt) {
	stop := context.AfterFunc(ctx, func() { up.Close() })
	defer stop()
	defer up.Close()
	hc := &helloCheck{br: br, cc: cc, up: up, host: a.ev.Host, port: a.ev.Port, timeout: p.cfg.HandshakeTimeout,
		deny: func(c policy.Category, reason string) {
			a.ev.BytesUp, a.ev.BytesDown = up.nwritten.Load(), up.nread.Load()
			a.refused(c, reason)
			p.emitAttempt(a, false)
		}}
	err := tunnel(cc, hc, up)
	if de := (*deniedError)(nil); errors.As(err, &de) {
		return // hc.deny reported it
	}
	a.ev.BytesUp, a.ev.BytesDown = up.nwritten.Load(), up.nread.Load()
	if err != nil {
		a.ev.Error = err.Error()
	}
	p.emitAttempt(a, true)
}

// deniedError stops a tunnel that the proxy refused part-way (a TLS server name mismatch),
// once the refusal is reported.
type deniedError struct{ reason string }

func (e *deniedError) Error() string { return "denied: " + e.reason }

// helloCheck is the client side of a tunnel: on its first Read it checks a TLS
// ClientHello, if there is one, then reads through br.
type helloCheck struct {
	br      *bufio.Reader
	cc      *idleConn
	up      *idleConn
	host    string
	port    uint16
	timeout time.Duration
	checked bool
	// deny reports the tunnel refused; it runs before the client is told, so a client
	// that ends on the refusal finds it in its command's result.
	deny func(c policy.Category, reason string)
}

func (h *helloCheck) Read(b []byte) (int, error) {
	if !h.checked {
		h.checked = true
		if err := h.check(); err != nil {
			return 0, err
		}
	}
	return h.br.Read(b)
}

// spliceSource implements spliceSource: it checks the ClientHello, sends upstream what
// the client sent beyond it that br already holds, and hands over the client conn.
func (h *helloCheck) spliceSource(dst *idleConn) (*idleConn, error) {
	if !h.checked {
		h.checked = true
		if err := h.check(); err != nil {
			return nil, err
		}
	}
	if n := h.br.Buffered(); n > 0 {
		b, _ := h.br.Peek(n)
		if _, err := dst.Write(b); err != nil {
			return nil, err
		}
		_, _ = h.br.Discard(n)
	}
	return h.cc, nil
}

// check waits for the first byte and, for a TLS handshake, reads and checks the
// ClientHello and sends it upstream.
func (h *helloCheck) check() error {
	if h.port == 443 {
		h.cc.setHard(time.Now().Add(h.timeout))
	}
	first, err := h.br.Peek(1)
	if err != nil {
		return err // io.EOF included: the client sent nothing and closed
	}
	const tlsHandshake = 0x16
	if first[0] != tlsHandshake && h.port != 443 {
		h.cc.setHard(time.Time{})
		return nil
	}
	h.cc.setHard(time.Now().Add(h.timeout))
	sni, hello, err := readClientHello(h.br)
	h.cc.setHard(time.Time{})
	if reason := sniMismatch(h.host, sni, err); reason != "" {
		if err != nil {
			h.deny(policy.Malformed, reason)
			return &deniedError{reason}
		}
		h.deny(policy.ServerNameMismatch, reason)
		refuseHandshake(h.cc)
		return &deniedError{reason}
	}
	if _, err := h.up.Write(hello); err != nil {
		return fmt.Errorf("sending client hello: %w", err)
	}
	return nil
}

// sniMismatch returns why a ClientHello does not fit the checked host, or "".
func sniMismatch(host, sni string, helloErr error) string {
	if helloErr != nil {
		return "expected a tls client hello"
	}
	if sni == "" {
		if _, err := netip.ParseAddr(host); err == nil {
			return ""
		}
		return fmt.Sprintf("tls client hello names no server; host %q needs it", host)
	}
	if n, err := policy.Normalize(sni); err != nil || n != host {
		return fmt.Sprintf("tls server name %s does not match host %q", quoteBounded(sni), host)
	}
	return ""
}

// tlsAccessDenied is a fatal TLS alert record, access_denied (49, RFC 8446 section 6.2),
// which clients report as such ("tls: access denied", "tlsv1 alert access denied")
// instead of a connection that was merely reset.
var tlsAccessDenied = []byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 49}

// refuseHandshake answers a ClientHello the proxy refuses with the access_denied alert.
// Nothing was sent to the client on this connection before (no server speaks before the
// ClientHello), so the alert is the first record it reads. A failed write changes
// nothing: the connection is closed next anyway.
func refuseHandshake(w io.Writer) { _, _ = w.Write(tlsAccessDenied) }

func quoteBounded(s string) string { return fmt.Sprintf("%q", bound(s, 80)) }

// maxHello bounds the bytes read while looking for a ClientHello (crypto/tls itself stops
// at 64 KiB handshake messages).
const maxHello = 70 << 10

// errSniffed stops the TLS server handshake once the ClientHello has been seen.
var errSniffed = errors.New("client hello read")

// readClientHello reads a TLS ClientHello from r with crypto/tls's own parser and returns
// its server name and every byte consumed, which the caller must send upstream first. The
// handshake is abandoned before anything is written (writes go nowhere).
func readClientHello(r io.Reader) (string, []byte, error) {
	var seen bytes.Buffer
	conn := sniffConn{r: io.TeeReader(io.LimitReader(r, maxHello), &seen)}
	var (
		sni string
		got bool
	)
	err := tls.Server(conn, &tls.Config{
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			sni, got = h.ServerName, true
			return nil, errSniffed
		},
	}).Handshake()
	if !got {
		return "", seen.Bytes(), fmt.Errorf("reading tls client hello: %w", err)
	}
	return sni, seen.Bytes(), nil
}

// sniffConn is a read-only net.Conn for readClientHello; writes are discarded.
type sniffConn struct{ r io.Reader }

func (c sniffConn) Read(b []byte) (int, error)       { return c.r.Read(b) }
func (c sniffConn) Write(b []byte) (int, error)      { return len(b), nil }
func (c sniffConn) Close() error                     { return nil }
func (c sniffConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c sniffConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c sniffConn) SetDeadline(time.Time) error      { return nil }
func (c sniffConn) SetReadDeadline(time.Time) error  { return nil }
func (c sniffConn) SetWriteDeadline(time.Time) error { return nil }
