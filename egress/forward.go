package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cordonhq/cordon/egress/policy"
)

// forwardHTTP forwards one absolute-form request upstream, relays the response, and
// reports the attempt. It returns whether the client connection may carry another request.
//
// The destination is read from the raw request-target and must agree with the Host
// header; the outgoing request is rebuilt from parts (origin-form path, normalised Host,
// end-to-end headers only) and re-framed by the transport, so what the client wrote
// cannot smuggle a second request or a different Host to the destination.
func (p *Proxy) forwardHTTP(ctx context.Context, cc *idleConn, bw *bufio.Writer, req *http.Request, hosts []string) bool {
	a := newAttempt(protoHTTP)
	rawHost, port, err := requestTarget(req)
	if err != nil {
		a.ev.Host = bound(req.RequestURI, 255)
		a.refused(policy.Malformed, err.Error())
		p.denyHTTP(cc, bw, a)
		return false
	}
	host, err := policy.Normalize(rawHost)
	if err != nil {
		a.target(rawHost, port, policy.Decision{})
		a.refused(policy.Malformed, err.Error())
		p.denyHTTP(cc, bw, a)
		return false
	}
	a.target(host, port, policy.Decision{Host: host})
	if reason := checkHostHeader(hosts, host, port); reason != "" {
		a.refused(policy.Malformed, reason)
		p.denyHTTP(cc, bw, a)
		return false
	}
	allowed, d, err := p.check(ctx, host, port)
	if len(allowed) == 0 {
		a.deniedBy(d)
		if err != nil {
			a.ev.Error = err.Error()
			p.unreachableHTTP(cc, bw, a, false)
			return false
		}
		p.denyHTTP(cc, bw, a)
		return false
	}
	return p.roundTrip(ctx, cc, bw, req, a, allowed)
}

// roundTrip sends the checked request through the transport and relays the response.
func (p *Proxy) roundTrip(ctx context.Context, cc *idleConn, bw *bufio.Writer, req *http.Request, a *attempt, allowed []policy.Decision) bool {
	authority := net.JoinHostPort(a.ev.Host, strconv.Itoa(int(a.ev.Port)))
	var remote net.Addr
	var upConn *idleConn
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			remote = info.Conn.RemoteAddr()
			upConn, _ = info.Conn.(*idleConn)
		},
	})
	ctx = context.WithValue(ctx, targetKey{}, &checkedTarget{authority: authority, port: a.ev.Port, allowed: allowed})
	body := newBodyCounter(req.Body)
	out := outgoing(ctx, req, authority, body)
	if strings.EqualFold(req.Header.Get("Expect"), "100-continue") {
		// The expectation is hop-by-hop in practice: answer it here, send the body at once.
		_, _ = bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
		_ = bw.Flush()
	}
	resp, err := p.transport.RoundTrip(out)
	if err != nil {
		body.wait(p.cfg.IdleTimeout)
		a.ev.Error, a.ev.BytesUp = err.Error(), body.n.Load()
		a.allowedBy(allowed[0], nil)
		p.unreachableHTTP(cc, bw, a, true)
		return false
	}
	defer resp.Body.Close()
	if err := p.scrubResponse(resp, nil); err != nil {
		// A destination that echoes a credential it was given elsewhere: nothing is relayed.
		body.wait(p.cfg.IdleTimeout)
		a.ev.Error = err.Error()
		a.allowedBy(allowed[0], remote)
		p.unreachableHTTP(cc, bw, a, true)
		return false
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// Upgrade headers are stripped, so this is a misbehaving server; nothing is relayed.
		body.wait(p.cfg.IdleTimeout)
		a.ev.Error = "destination switched protocols unasked"
		a.allowedBy(allowed[0], remote)
		p.unreachableHTTP(cc, bw, a, true)
		return false
	}
	d := allowed[0]
	if ap, err := netip.ParseAddrPort(fmt.Sprint(remote)); err == nil {
		d = p.cfg.Policy.Decide(policy.DecideArgs{Host: a.ev.Host, Port: a.ev.Port, Addr: ap.Addr()})
		if d.Verdict != policy.Allow { // cannot happen: every pooled connection was checked
			a.deniedBy(d)
			p.denyHTTP(cc, bw, a)
			return false
		}
	}
	a.allowedBy(d, remote)
	down, werr := writeResponse(bw, cc, upConn, req, resp)
	finished := body.wait(p.cfg.IdleTimeout)
	a.ev.BytesUp, a.ev.BytesDown = body.n.Load(), down
	if werr != nil {
		a.ev.Error = werr.Error()
	}
	p.emitAttempt(a, true)
	return werr == nil && finished && body.eof.Load() && !req.Close && req.ProtoAtLeast(1, 1)
}

// requestTarget returns the host and port of an absolute-form http:// request-target,
// taken from the raw text the client sent.
func requestTarget(req *http.Request) (string, uint16, error) {
	const scheme = "http://"
	uri := req.RequestURI
	if len(uri) < len(scheme) || !strings.EqualFold(uri[:len(scheme)], scheme) {
		if strings.HasPrefix(strings.ToLower(uri), "https://") {
			return "", 0, errors.New("https:// requests must use CONNECT")
		}
		return "", 0, errors.New("not an absolute-form http:// request")
	}
	if req.URL.Opaque != "" || req.URL.User != nil {
		return "", 0, errors.New("malformed request target")
	}
	auth := uri[len(scheme):]
	if i := strings.IndexAny(auth, "/?#"); i >= 0 {
		auth = auth[:i]
	}
	if strings.Contains(auth, "@") {
		return "", 0, fmt.Errorf("%w: userinfo is not allowed", policy.ErrMalformedHost)
	}
	return splitAuthority(auth, 80)
}

// checkHostHeader returns why the Host header does not name host:port, or "".
func checkHostHeader(hosts []string, host string, port uint16) string {
	if len(hosts) != 1 {
		return "request needs exactly one host header"
	}
	hh, hp, err := splitAuthority(hosts[0], 80)
	if err == nil {
		hh, err = policy.Normalize(hh)
	}
	if err != nil || hh != host || hp != port {
		return fmt.Sprintf("host header %s does not match request target %s",
			strconv.Quote(bound(hosts[0], 80)), net.JoinHostPort(host, strconv.Itoa(int(port))))
	}
	return ""
}

// outgoing builds the upstream request from the parts of req that are end-to-end.
func outgoing(ctx context.Context, req *http.Request, authority string, body *bodyCounter) *http.Request {
	h := req.Header.Clone()
	stripHop(h)
	h.Del("Expect")
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = []string{""} // keep net/http from adding its own
	}
	out := &http.Request{
		Method: req.Method,
		URL: &url.URL{
			Scheme: "http", Host: authority,
			Path: req.URL.Path, RawPath: req.URL.RawPath, RawQuery: req.URL.RawQuery,
		},
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        h,
		Host:          authority,
		ContentLength: req.ContentLength,
		Close:         false,
	}
	if req.ContentLength != 0 || len(req.TransferEncoding) > 0 {
		out.Body = body
		if req.ContentLength < 0 {
			out.TransferEncoding = []string{"chunked"}
		}
	} else {
		body.finish(true)
	}
	return out.WithContext(ctx)
}

// writeResponse relays resp to the client with its own framing (Content-Length when
// known, chunked otherwise), flushing after every read so streamed responses are not held
// back. A body framed by Content-Length moves from up to cc with splice(2) where it can
// (see relaySpliced). It returns the body bytes written.
func writeResponse(bw *bufio.Writer, cc, up *idleConn, req *http.Request, resp *http.Response) (int64, error) {
	code := resp.StatusCode
	text := strings.TrimPrefix(resp.Status, strconv.Itoa(code)+" ")
	if text == "" || text == resp.Status {
		text = http.StatusText(code)
	}
	h := resp.Header.Clone()
	stripHop(h)
	bodyless := req.Method == http.MethodHead || code/100 == 1 || code == http.StatusNoContent || code == http.StatusNotModified
	chunked := false
	switch {
	case bodyless:
		if req.Method == http.MethodHead && resp.ContentLength >= 0 {
			h.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
		}
	case resp.ContentLength >= 0:
		h.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	case req.ProtoAtLeast(1, 1):
		h.Set("Transfer-Encoding", "chunked")
		chunked = true
	default:
		// An HTTP/1.0 client cannot read chunks: the body ends when the connection does.
	}
	if req.Close || !req.ProtoAtLeast(1, 1) {
		h.Set("Connection", "close")
	}
	fmt.Fprintf(bw, "HTTP/1.1 %03d %s\r\n", code, printable(text))
	if err := h.Write(bw); err != nil {
		return 0, fmt.Errorf("writing response head: %w", err)
	}
	_, _ = bw.WriteString("\r\n")
	if bodyless {
		return 0, bw.Flush()
	}
	var n int64
	var err error
	if !chunked && spliceable(resp, up) {
		n, err = relaySpliced(bw, cc, up, resp.Body, resp.ContentLength)
	} else {
		n, err = copyFlush(bw, resp.Body, chunked)
	}
	if err == nil && resp.ContentLength >= 0 && n != resp.ContentLength {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return n, fmt.Errorf("relaying response body: %w", err)
	}
	return n, bw.Flush()
}

// copyFlush copies src to bw through a pooled buffer, chunk-encoding when asked, and
// flushes after each read.
func copyFlush(bw *bufio.Writer, src io.Reader, chunked bool) (int64, error) {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	var total int64
	for {
		n, err := src.Read(buf)
		if n > 0 {
			total += int64(n)
			if chunked {
				fmt.Fprintf(bw, "%x\r\n", n)
			}
			_, _ = bw.Write(buf[:n])
			if chunked {
				_, _ = bw.WriteString("\r\n")
			}
			if ferr := bw.Flush(); ferr != nil {
				return total, ferr
			}
		}
		if errors.Is(err, io.EOF) {
			if chunked {
				_, _ = bw.WriteString("0\r\n\r\n")
			}
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// bodyCounter wraps a client's request body for the transport. It counts bytes, notes
// whether the body was read to its end (only then can the next request on the connection
// be parsed), and signals when the transport is done with it: the transport may read it
// from another goroutine after RoundTrip returns, and the client connection must not be
// read by two goroutines at once. Its Close does not drain the client's body.
type bodyCounter struct {
	r    io.Reader
	n    atomic.Int64
	eof  atomic.Bool
	once sync.Once
	done chan struct{}
}

func newBodyCounter(r io.Reader) *bodyCounter {
	return &bodyCounter{r: r, done: make(chan struct{})}
}

func (b *bodyCounter) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.n.Add(int64(n))
	if errors.Is(err, io.EOF) {
		b.eof.Store(true)
	}
	return n, err
}

func (b *bodyCounter) Close() error {
	b.finish(false)
	return nil
}

// finish marks the body done; eof says it was empty to begin with.
func (b *bodyCounter) finish(eof bool) {
	if eof {
		b.eof.Store(true)
	}
	b.once.Do(func() { close(b.done) })
}

// wait waits up to d for the transport to be done with the body and reports whether it is.
func (b *bodyCounter) wait(d time.Duration) bool {
	select {
	case <-b.done:
		return true
	case <-time.After(d):
		return false
	}
}
