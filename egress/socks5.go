package egress

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/cordonhq/cordon/internal/event"
	"io"
	"net/netip"
	"os"
	"syscall"
	"time"

	"github.com/cordonhq/cordon/egress/policy"
)

// SOCKS5 wire constants (RFC 1928).
const (
	socksVersion    = 0x05
	socksNoAuth     = 0x00
	socksNoMethod   = 0xff
	socksCmdConnect = 0x01
	socksAtypIPv4   = 0x01
	socksAtypDomain = 0x03
	socksAtypIPv6   = 0x04
)

// SOCKS5 reply codes.
const (
	socksOK              = 0x00
	socksGeneralFailure  = 0x01
	socksNotAllowed      = 0x02 // connection not allowed by ruleset
	socksNetUnreachable  = 0x03
	socksHostUnreachable = 0x04
	socksConnRefused     = 0x05
	socksCmdUnsupported  = 0x07
	socksAtypUnsupported = 0x08
)

// socksError is a SOCKS5 connection that cannot be served. Its answer is sent only once
// the refusal is reported, so a client that ends on it finds the refusal in its result.
type socksError struct {
	reply byte   // the code to answer the request with; 0 for none
	early []byte // the answer to a refused method or password, before any request
	msg   string
	auth  bool // the client did not present the run's token: a denial, not a malformed request
}

func (e *socksError) Error() string { return e.msg }

// answer tells the client of the refusal: its early answer, or a reply with code when
// the request was read (0 for none: the client did not speak SOCKS5 well enough).
func (e *socksError) answer(cc *idleConn, code byte) {
	switch {
	case e.early != nil:
		_, _ = cc.Write(e.early)
	case e.reply != 0:
		_ = writeSOCKSReply(cc, code)
	}
}

// serveSOCKS serves one SOCKS5 connection: no authentication (or the run's token, see
// [Config.Token]), one CONNECT (domain name,
// IPv4 or IPv6), then a tunnel. BIND and UDP ASSOCIATE are refused: the sandbox has no
// other way out, and neither fits a per-destination allowlist.
func (p *Proxy) serveSOCKS(ctx context.Context, cc *idleConn, br *bufio.Reader) {
	a := newAttempt(protoSOCKS)
	cc.setHard(time.Now().Add(p.cfg.HandshakeTimeout))
	host, port, err := readSOCKS(cc, br, p.cfg.Token)
	cc.setHard(time.Time{})
	if err != nil {
		a.target(host, port, policy.Decision{})
		se := (*socksError)(nil)
		isSOCKS := errors.As(err, &se)
		cat := policy.Malformed
		if isSOCKS && se.auth {
			cat = policy.Denied
		}
		a.refused(cat, err.Error())
		p.emitAttempt(a, false)
		if isSOCKS {
			se.answer(cc, se.reply)
		}
		return
	}
	p.openTunnel(ctx, cc, br, a, host, port, socksAnswers{p: p, cc: cc})
}

// socksAnswers answers a SOCKS5 CONNECT with its replies.
type socksAnswers struct {
	p  *Proxy
	cc *idleConn
}

func (s socksAnswers) denied(a *attempt) {
	s.p.emitAttempt(a, false)
	_ = writeSOCKSReply(s.cc, socksNotAllowed)
}

func (s socksAnswers) unreachable(a *attempt, allowed bool, err error) {
	s.p.emitAttempt(a, allowed)
	_ = writeSOCKSReply(s.cc, socksReplyFor(err))
}

func (s socksAnswers) established() error { return writeSOCKSReply(s.cc, socksOK) }

// readSOCKS negotiates the method and reads the request, answering the method selection.
// It returns the requested host (as given: a name, or an address in text form) and port.
// With a token (see [Config.Token]) the client must authenticate with it first.
func readSOCKS(cc *idleConn, br *bufio.Reader, token string) (string, uint16, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return "", 0, fmt.Errorf("reading socks5 greeting: %w", err)
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(br, methods); err != nil {
		return "", 0, fmt.Errorf("reading socks5 methods: %w", err)
	}
	method := socksMethod(methods, token)
	if method == socksNoMethod {
		none := []byte{socksVersion, socksNoMethod}
		if token != "" {
			return "", 0, &socksError{early: none, msg: reasonAuth + " (the client offers no username/password authentication)", auth: true}
		}
		return "", 0, &socksError{early: none, msg: "socks5 client offers no supported authentication method"}
	}
	if _, err := cc.Write([]byte{socksVersion, method}); err != nil {
		return "", 0, fmt.Errorf("writing socks5 method: %w", err)
	}
	switch method {
	case socksUserPass:
		if err := readSOCKSAuth(cc, br, token); err != nil {
			return "", 0, err
		}
	}
	var req [4]byte
	if _, err := io.ReadFull(br, req[:]); err != nil {
		return "", 0, fmt.Errorf("reading socks5 request: %w", err)
	}
	if req[0] != socksVersion {
		return "", 0, &socksError{msg: fmt.Sprintf("socks5 request has version %d", req[0])}
	}
	host, err := readSOCKSAddr(br, req[3])
	if err != nil {
		return "", 0, err
	}
	var pb [2]byte
	if _, err := io.ReadFull(br, pb[:]); err != nil {
		return "", 0, fmt.Errorf("reading socks5 port: %w", err)
	}
	port := binary.BigEndian.Uint16(pb[:])
	if req[1] != socksCmdConnect {
		return host, port, &socksError{reply: socksCmdUnsupported, msg: fmt.Sprintf("socks5 command %d is not supported (only connect)", req[1])}
	}
	return host, port, nil
}

// readSOCKSAddr reads DST.ADDR of type atyp. A domain name is returned as sent; policy
// normalisation rejects anything that is not a plain name.
func readSOCKSAddr(br *bufio.Reader, atyp byte) (string, error) {
	switch atyp {
	case socksAtypIPv4:
		var b [4]byte
		if _, err := io.ReadFull(br, b[:]); err != nil {
			return "", fmt.Errorf("reading socks5 ipv4 address: %w", err)
		}
		return netip.AddrFrom4(b).String(), nil
	case socksAtypIPv6:
		var b [16]byte
		if _, err := io.ReadFull(br, b[:]); err != nil {
			return "", fmt.Errorf("reading socks5 ipv6 address: %w", err)
		}
		return netip.AddrFrom16(b).String(), nil
	case socksAtypDomain:
		n, err := br.ReadByte()
		if err != nil {
			return "", fmt.Errorf("reading socks5 name length: %w", err)
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(br, b); err != nil {
			return "", fmt.Errorf("reading socks5 name: %w", err)
		}
		return string(b), nil
	}
	return "", &socksError{reply: socksAtypUnsupported, msg: fmt.Sprintf("socks5 address type %d is not supported", atyp)}
}

// writeSOCKSReply answers the request. The bound address is always 0.0.0.0:0: the
// workload has no use for the proxy's own address, and it is not the workload's to know.
func writeSOCKSReply(cc *idleConn, code byte) error {
	_, err := cc.Write([]byte{socksVersion, code, 0, socksAtypIPv4, 0, 0, 0, 0, 0, 0})
	if err != nil {
		return fmt.Errorf("writing socks5 reply: %w", err)
	}
	return nil
}

// socksReplyFor maps a connection failure to the closest SOCKS5 reply code.
func socksReplyFor(err error) byte {
	switch {
	case errors.Is(err, errUnresolved), errors.Is(err, os.ErrDeadlineExceeded),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ETIMEDOUT):
		return socksHostUnreachable
	case errors.Is(err, syscall.ECONNREFUSED):
		return socksConnRefused
	case errors.Is(err, syscall.ENETUNREACH):
		return socksNetUnreachable
	}
	return socksGeneralFailure
}

// refuseSOCKS answers a SOCKS5 connection over the limit with a general failure, after
// the method negotiation and request (the reply has nowhere to go before them).
// It reports the refusal first.
func (p *Proxy) refuseSOCKS(cc *idleConn, br *bufio.Reader, ev event.NetBody) {
	host, port, err := readSOCKS(cc, br, p.cfg.Token)
	se := (*socksError)(nil)
	if err == nil || errors.As(err, &se) && se.reply != 0 {
		ev.Host, ev.Port = bound(host, 255), port
		if n, err := policy.Normalize(host); err == nil {
			ev.Host = n
		}
	}
	p.emit(ev, false)
	switch {
	case err == nil:
		_ = writeSOCKSReply(cc, socksGeneralFailure)
	case se != nil:
		se.answer(cc, socksGeneralFailure)
	}
	lingerClose(cc)
}
