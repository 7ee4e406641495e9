package egress

import (
	"bufio"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/cordonhq/cordon/egress/policy"
)

// Client authentication. A proxy that listens on a loopback TCP port (the seatbelt
// backend's: macOS has no network namespace to hide it in) can be reached by every
// local process, not only the sandbox's. [Config.Token] then names the one client that
// may use it: HTTP requests carry it as the password of a Basic Proxy-Authorization
// header, SOCKS5 clients as the password of RFC 1929 username/password authentication.
// Tools take both from a proxy URL of the form http://cordon:TOKEN@127.0.0.1:PORT.

const (
	socksUserPass    = 0x02 // RFC 1928 method: username/password (RFC 1929)
	socksAuthVersion = 0x01 // RFC 1929 subnegotiation version
)

// reasonAuth is the deny reason of a client without the run's token.
const reasonAuth = "proxy authentication failed: the run's token is missing or wrong"

// tokenOK reports whether got is the token, in constant time.
func tokenOK(token, got string) bool {
	return subtle.ConstantTimeCompare([]byte(token), []byte(got)) == 1
}

// httpAuthorized reports whether req carries the token, or no token is required.
func (p *Proxy) httpAuthorized(req *http.Request) bool {
	if p.cfg.Token == "" {
		return true
	}
	scheme, cred, ok := strings.Cut(req.Header.Get("Proxy-Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return false
	}
	_, pass, ok := strings.Cut(string(raw), ":")
	return ok && tokenOK(p.cfg.Token, pass)
}

// denyAuthHTTP answers a request without the token with 407 and reports the attempt.
func (p *Proxy) denyAuthHTTP(cc *idleConn, bw *bufio.Writer, req *http.Request) {
	proto, hostport := protoHTTP, req.Host
	if req.Method == http.MethodConnect {
		proto, hostport = protoConnect, req.RequestURI
	}
	a := newAttempt(proto)
	if host, port, err := splitAuthority(hostport, 80); err == nil {
		a.target(host, port, policy.Decision{})
	}
	a.refused(policy.Denied, reasonAuth)
	p.emitAttempt(a, false)
	writeText(bw, http.StatusProxyAuthRequired, http.StatusText(http.StatusProxyAuthRequired),
		[]string{`Proxy-Authenticate: Basic realm="cordon"`}, "cordon: "+reasonAuth+"\n")
	lingerClose(cc)
}

// socksMethod picks the authentication method from the client's offer: none when no
// token is required, username/password when one is, [socksNoMethod] otherwise.
func socksMethod(methods []byte, token string) byte {
	want := byte(socksNoAuth)
	if token != "" {
		want = socksUserPass
	}
	for _, m := range methods {
		if m == want {
			return want
		}
	}
	return socksNoMethod
}

// readSOCKSAuth reads the RFC 1929 subnegotiation and answers success when the password
// is the token; otherwise its error carries the failure status, sent once the refusal is
// reported.
func readSOCKSAuth(cc *idleConn, br *bufio.Reader, token string) error {
	ver, err := br.ReadByte()
	if err != nil {
		return fmt.Errorf("reading socks5 authentication: %w", err)
	}
	if ver != socksAuthVersion {
		return &socksError{msg: fmt.Sprintf("socks5 authentication has version %d", ver)}
	}
	if _, err := readSOCKSString(br); err != nil { // the user name: any
		return err
	}
	pass, err := readSOCKSString(br)
	if err != nil {
		return err
	}
	if !tokenOK(token, pass) {
		return &socksError{early: []byte{socksAuthVersion, 1}, msg: reasonAuth, auth: true}
	}
	if _, err := cc.Write([]byte{socksAuthVersion, 0}); err != nil {
		return fmt.Errorf("writing socks5 authentication status: %w", err)
	}
	return nil
}

// readSOCKSString reads a length-prefixed string of RFC 1929.
func readSOCKSString(br *bufio.Reader) (string, error) {
	n, err := br.ReadByte()
	if err != nil {
		return "", fmt.Errorf("reading socks5 authentication: %w", err)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(br, b); err != nil {
		return "", fmt.Errorf("reading socks5 authentication: %w", err)
	}
	return string(b), nil
}
