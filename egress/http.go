package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"github.com/cordonhq/cordon/internal/event"
	"net/http"
	"net/textproto"
	"strings"
	"time"

	"github.com/cordonhq/cordon/egress/policy"
)

// errHeadTooLarge reports a request head that does not fit in maxHead bytes.
var errHeadTooLarge = errors.New("request head too large")

// serveHTTP serves HTTP proxy requests on one client connection until it closes, a request
// asks to close it, or a CONNECT turns it into a tunnel.
//
// The loop parses requests itself rather than through net/http.Server because a server
// deletes the Host header of absolute-form requests before the handler sees it, and the
// proxy must check that header against the request target.
func (p *Proxy) serveHTTP(ctx context.Context, cc *idleConn, br *bufio.Reader) {
	bw := bufio.NewWriterSize(cc, 4<<10)
	for first := true; ; first = false {
		if !first {
			cc.setHard(time.Time{}) // wait up to IdleTimeout for the next request
			if _, err := br.Peek(1); err != nil {
				return
			}
		}
		cc.setHard(time.Now().Add(p.cfg.HandshakeTimeout))
		head, err := peekHead(br)
		switch {
		case errors.Is(err, errHeadTooLarge):
			p.badRequest(cc, bw, http.StatusRequestHeaderFieldsTooLarge, err)
			return
		case err != nil && br.Buffered() > 0:
			// A request was started but not finished in time: still an attempt.
			p.badRequest(cc, bw, http.StatusRequestTimeout, fmt.Errorf("incomplete request head: %w", err))
			return
		case err != nil:
			return // closed or idle between requests: nothing was attempted
		}
		hosts := headHosts(head)
		req, err := http.ReadRequest(br)
		if err != nil {
			p.badRequest(cc, bw, http.StatusBadRequest, fmt.Errorf("malformed request: %w", err))
			return
		}
		cc.setHard(time.Time{})
		if !p.httpAuthorized(req) {
			p.denyAuthHTTP(cc, bw, req)
			return
		}
		if req.Method == http.MethodConnect {
			p.serveConnect(ctx, cc, br, bw, req)
			return
		}
		if !p.forwardHTTP(ctx, cc, bw, req, hosts) {
			return
		}
	}
}

// peekHead waits until br holds a whole request head (through the blank line) and returns
// it without consuming it, or errHeadTooLarge when it does not fit in br's buffer.
func peekHead(br *bufio.Reader) ([]byte, error) {
	searched := 0 // bytes already searched, so a trickling client costs linear time
	for {
		// Look at what is buffered first: the sniff may already have read the whole
		// head, and asking for one more byte would wait for a client that is waiting too.
		b, _ := br.Peek(br.Buffered())
		if end := headEnd(b, max(searched-2, 0)); end > 0 {
			return b[:end], nil
		}
		searched = len(b)
		n := br.Buffered() + 1
		if n > br.Size() {
			return nil, errHeadTooLarge
		}
		if _, err := br.Peek(n); err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				return nil, errHeadTooLarge
			}
			return nil, err
		}
	}
}

// headEnd returns the length of the head in b (through its blank line), searching from
// from, or -1. textproto accepts bare LF line ends, so a blank line is LF LF or LF CR LF.
func headEnd(b []byte, from int) int {
	for i := from; i < len(b); i++ {
		if b[i] != '\n' {
			continue
		}
		switch {
		case i+1 < len(b) && b[i+1] == '\n':
			return i + 2
		case i+2 < len(b) && b[i+1] == '\r' && b[i+2] == '\n':
			return i + 3
		}
	}
	return -1
}

// headHosts returns the values of the Host header lines of a request head, parsed by the
// same textproto reader net/http uses, so both see the same headers.
func headHosts(head []byte) []string {
	tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(head)))
	if _, err := tp.ReadLine(); err != nil {
		return nil
	}
	h, err := tp.ReadMIMEHeader()
	if err != nil {
		return nil
	}
	return h.Values("Host")
}

// hopHeaders are connection-scoped headers that a proxy must not forward (RFC 9110 7.6.1),
// plus the framing headers the proxy rewrites itself.
var hopHeaders = []string{
	"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade", "Content-Length",
}

// stripHop removes hop-by-hop headers, the headers Connection names, and every Proxy-*
// header (which might carry credentials meant for this proxy) from h.
func stripHop(h http.Header) {
	for _, v := range h.Values("Connection") {
		for name := range strings.SplitSeq(v, ",") {
			if name = textproto.TrimString(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
	for k := range h {
		if strings.HasPrefix(k, "Proxy-") {
			delete(h, k)
		}
	}
}

// splitAuthority splits an authority ("host", "host:port", "[v6]", "[v6]:port") strictly,
// with defPort when no port is given.
func splitAuthority(s string, defPort uint16) (string, uint16, error) {
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") || !strings.HasPrefix(s, "[") && !strings.Contains(s, ":") {
		if s == "" {
			return "", 0, fmt.Errorf("%w: empty", policy.ErrMalformedHost)
		}
		return s, defPort, nil
	}
	return policy.SplitHostPort(s)
}

// denyHTTP writes the 403 that tells the workload which destination the contract refused,
// why, and the rule that would allow it, and reports the attempt. It shows only what
// docs/egress.md lists: the destination the client asked for, the policy's reason and its
// category, and the rule for that destination; never the contract's other rules.
//
// The body says it all; X-Cordon-Denied carries the category and X-Cordon-Allow-Rule the
// rule, for programs. A CONNECT client (curl, git, go) shows only the status line, so
// there the reason phrase says it too: "403 cordon: example.com:443 not in network.allow".
// Plain HTTP keeps "403 Forbidden", which clients print as the error they always have.
func (p *Proxy) denyHTTP(cc *idleConn, bw *bufio.Writer, a *attempt) {
	dest, cat := a.hostport(), a.ev.Category
	if cat == "" {
		cat = policy.Denied.String()
	}
	body := fmt.Sprintf("cordon: egress to %s denied by contract (%s)\n", dest, printable(a.ev.Reason))
	hdr := []string{"X-Cordon-Denied: " + printable(cat)}
	if rule := printable(a.ev.SuggestedRule); rule != "" {
		body += "cordon: to allow it, add to the contract: " + rule + "\n"
		hdr = append(hdr, "X-Cordon-Allow-Rule: "+rule)
	}
	phrase := http.StatusText(http.StatusForbidden)
	if a.ev.Proto == protoConnect {
		phrase = "cordon: " + dest + " " + printable(cat)
	}
	p.emitAttempt(a, false) // before the client can act on the answer: see doc.go
	writeText(bw, http.StatusForbidden, phrase, hdr, body)
	lingerClose(cc)
}

// unreachableHTTP writes 502 for a destination that was allowed (or could not be
// resolved) but did not answer, and reports the attempt.
func (p *Proxy) unreachableHTTP(cc *idleConn, bw *bufio.Writer, a *attempt, allowed bool) {
	body := fmt.Sprintf("cordon: cannot reach %s (%s)\n", a.hostport(), printable(p.scrubText(a.ev.Error)))
	p.emitAttempt(a, allowed)
	writeSimple(bw, http.StatusBadGateway, body)
	lingerClose(cc)
}

// badRequest answers a request the proxy could not parse and reports it as a denied
// attempt with no destination.
func (p *Proxy) badRequest(cc *idleConn, bw *bufio.Writer, code int, err error) {
	a := newAttempt(protoHTTP)
	a.refused(policy.Malformed, err.Error())
	p.emitAttempt(a, false)
	writeSimple(bw, code, fmt.Sprintf("cordon: %s\n", printable(err.Error())))
	lingerClose(cc)
}

// refuseHTTP answers a connection over the limit with 503, after reading its request head
// so the client sees the answer rather than a reset, and reports it first.
func (p *Proxy) refuseHTTP(cc *idleConn, br *bufio.Reader, ev event.NetBody) {
	if req, err := http.ReadRequest(br); err == nil {
		hostport := req.Host
		if req.Method == http.MethodConnect {
			ev.Proto = protoConnect
			hostport = req.RequestURI
		}
		if host, port, err := splitAuthority(hostport, 80); err == nil {
			ev.Host, ev.Port = bound(host, 255), port
			if n, err := policy.Normalize(host); err == nil {
				ev.Host = n
			}
		}
	}
	p.emit(ev, false)
	bw := bufio.NewWriter(cc)
	writeSimple(bw, http.StatusServiceUnavailable, "cordon: egress proxy busy ("+ev.Reason+")\n")
	lingerClose(cc)
}

// writeSimple writes a short text/plain response that closes the connection.
func writeSimple(bw *bufio.Writer, code int, body string) {
	writeText(bw, code, http.StatusText(code), nil, body)
}

// writeText writes a text/plain response that closes the connection, with the reason
// phrase and the extra header lines ("Key: value") given; all must be printable ASCII.
func writeText(bw *bufio.Writer, code int, phrase string, hdr []string, body string) {
	fmt.Fprintf(bw, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n", code, phrase)
	for _, h := range hdr {
		fmt.Fprintf(bw, "%s\r\n", h)
	}
	fmt.Fprintf(bw, "Content-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
	_ = bw.Flush()
}

// newTransport returns the transport that carries plain-HTTP requests upstream. It never
// uses a proxy from the environment, never speaks TLS or HTTP/2, never adds compression,
// and dials only through transportDial.
func (p *Proxy) newTransport() *http.Transport {
	return &http.Transport{
		Proxy:                  nil,
		DialContext:            p.transportDial,
		ForceAttemptHTTP2:      false,
		TLSNextProto:           map[string]func(string, *tls.Conn) http.RoundTripper{},
		DisableCompression:     true,
		MaxIdleConns:           64,
		MaxIdleConnsPerHost:    8,
		IdleConnTimeout:        p.cfg.IdleTimeout,
		MaxResponseHeaderBytes: maxHead,
		ReadBufferSize:         upstreamReadBuf,
	}
}
