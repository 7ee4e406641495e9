package egress

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cordonhq/cordon/egress/policy"
	"github.com/cordonhq/cordon/internal/secret"
)

// Intercept configures credential delivery by proxy: for the hosts of its credentials,
// and only those, the proxy terminates the client's TLS with a certificate minted by CA,
// replaces the credential's placeholder with its real value in every request, and
// re-encrypts to the destination, verifying its certificate against RootCAs.
//
// Every other destination is tunnelled untouched, so a placeholder sent anywhere else
// arrives as the worthless string it is.
type Intercept struct {
	// CA signs the certificates the proxy shows the sandbox. Required.
	CA *CA
	// Credentials are the credentials to inject; a host may appear in several.
	Credentials []Credential
	// RootCAs verifies destinations. Nil means the system's roots.
	RootCAs *x509.CertPool
}

// Credential is one credential the proxy injects.
type Credential struct {
	// Name is the credential's name in the contract (shown in logs, never the value).
	Name string
	// Hosts are the destinations it is sent to: host names or IP literals, any port the
	// policy allows.
	Hosts []string
	// Placeholder is what the sandbox holds instead of the value.
	Placeholder string
	// Value is the real credential. It is revealed only to be written to a verified
	// TLS connection to one of Hosts (and to check it against Placeholder).
	Value secret.Value
}

// minPlaceholder bounds how short a placeholder may be: a short one could occur in a
// header by chance.
const minPlaceholder = 8

func (ic *Intercept) validate() error {
	if ic.CA == nil {
		return errors.New("intercept: no CA")
	}
	var errs []error
	for _, c := range ic.Credentials {
		if v := c.Value.Reveal(); len(c.Placeholder) < minPlaceholder || v == "" || c.Placeholder == v ||
			strings.Contains(v, c.Placeholder) {
			errs = append(errs, fmt.Errorf("intercept: credential %s: placeholder must be at least %d bytes and differ from the value", c.Name, minPlaceholder))
		}
		if len(c.Hosts) == 0 {
			errs = append(errs, fmt.Errorf("intercept: credential %s has no hosts", c.Name))
		}
		for _, h := range c.Hosts {
			if _, err := policy.Normalize(h); err != nil {
				errs = append(errs, fmt.Errorf("intercept: credential %s: host %q: %w", c.Name, h, err))
			}
		}
	}
	return errors.Join(errs...)
}

// byHost indexes the credentials by normalised host, in order; nil for a nil Intercept.
func (ic *Intercept) byHost() map[string][]Credential {
	if ic == nil {
		return nil
	}
	m := map[string][]Credential{}
	for _, c := range ic.Credentials {
		seen := map[string]bool{}
		for _, h := range c.Hosts {
			if n, err := policy.Normalize(h); err == nil && !seen[n] {
				seen[n] = true
				m[n] = append(m[n], c)
			}
		}
	}
	return m
}

// CA is a certificate authority minted for one run: its key lives only in memory, and it
// signs short-lived leaf certificates for the intercepted hosts, cached per host.
type CA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

// caValidity is how long a run CA is valid; leafValidity how long each leaf is.
const (
	caValidity   = 7 * 24 * time.Hour
	leafValidity = 24 * time.Hour
	maxLeaves    = 256
)

// NewCA mints a fresh CA (ECDSA P-256) named for the run.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("run CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: bound("cordon run CA "+name, 64), Organization: []string{"cordon"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("run CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("run CA certificate: %w", err)
	}
	return &CA{
		cert: cert, key: key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		leaves:  map[string]*tls.Certificate{},
	}, nil
}

// CertPEM is the CA's certificate, PEM-encoded, for the sandbox to trust.
func (ca *CA) CertPEM() []byte { return append([]byte(nil), ca.certPEM...) }

// Certificate is the CA's parsed certificate.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}

// leaf returns a certificate for host (a normalised name or IP literal), minting it on
// first use and again when it is near expiry.
func (ca *CA) leaf(host string) (*tls.Certificate, error) {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if c, ok := ca.leaves[host]; ok && time.Until(c.Leaf.NotAfter) > time.Hour {
		return c, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: bound(host, 64)},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(leafValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		tmpl.IPAddresses = []net.IP{ip.AsSlice()}
	} else {
		tmpl.DNSNames = []string{host}
	}
	if tmpl.NotAfter.After(ca.cert.NotAfter) {
		tmpl.NotAfter = ca.cert.NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	parsed, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	c := &tls.Certificate{Certificate: [][]byte{der, ca.cert.Raw}, PrivateKey: key, Leaf: parsed}
	if len(ca.leaves) >= maxLeaves {
		clear(ca.leaves)
	}
	ca.leaves[host] = c
	return c, nil
}

// upstreamTLS completes a verified TLS handshake with the destination over up, for host.
func (p *Proxy) upstreamTLS(ctx context.Context, up *idleConn, host string) (*tls.Conn, error) {
	cfg := &tls.Config{
		RootCAs:    p.cfg.Intercept.RootCAs,
		NextProtos: []string{"http/1.1"},
		MinVersion: tls.VersionTLS12,
	}
	// For an IP literal crypto/tls sends no server name and verifies the certificate's
	// IP addresses instead.
	cfg.ServerName = host
	tc := tls.Client(up, cfg)
	hctx, cancel := context.WithTimeout(ctx, p.cfg.HandshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		return nil, fmt.Errorf("destination tls: %w", err)
	}
	if np := tc.ConnectionState().NegotiatedProtocol; np != "" && np != "http/1.1" {
		tc.Close()
		return nil, fmt.Errorf("destination tls: negotiated %q, not http/1.1", np)
	}
	return tc, nil
}

// intercepted serves an allowed, answered CONNECT or SOCKS5 tunnel to an intercepted host:
// it completes TLS with the client as host, then forwards HTTP/1.1 requests one at a time
// over upTLS with the credentials injected, until either side closes. It reports the
// attempt when it ends.
func (p *Proxy) intercepted(ctx context.Context, cc *idleConn, br *bufio.Reader, up *idleConn, upTLS *tls.Conn, a *attempt, creds []Credential) {
	stop := context.AfterFunc(ctx, func() { up.Close(); cc.Close() })
	defer stop()
	defer upTLS.Close()
	a.ev.Intercepted = true
	report := func(allowed bool) {
		a.ev.BytesUp, a.ev.BytesDown = up.nwritten.Load(), up.nread.Load()
		p.emitAttempt(a, allowed)
	}

	host := a.ev.Host
	var sniReason string
	client := tls.Server(&bufferedConn{idleConn: cc, r: br}, &tls.Config{
		NextProtos: []string{"http/1.1"},
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if sniReason = sniMismatch(host, h.ServerName, nil); sniReason != "" {
				a.refused(policy.ServerNameMismatch, sniReason)
				report(false)       // before the client is told
				refuseHandshake(cc) // before crypto/tls's own internal_error alert
				return nil, errors.New(sniReason)
			}
			return p.cfg.Intercept.CA.leaf(host)
		},
	})
	cc.setHard(time.Now().Add(p.cfg.HandshakeTimeout))
	err := client.Handshake()
	cc.setHard(time.Time{})
	if err != nil {
		if sniReason != "" {
			return // reported as it was refused
		}
		a.ev.Error = "client tls: " + err.Error()
		report(true)
		return
	}
	defer client.Close()

	cbr := getReader(client)
	defer putReader(cbr)
	cbw := bufio.NewWriterSize(client, 4<<10)
	lim := &io.LimitedReader{R: upTLS}
	ubr := bufio.NewReaderSize(lim, 4<<10)
	for {
		err := p.interceptOne(cc, cbr, cbw, upTLS, lim, ubr, host, creds)
		if errors.Is(err, errDone) {
			break
		}
		if err != nil {
			a.ev.Error = err.Error()
			break
		}
		a.ev.Requests++
	}
	report(true)
}

// errDone ends an intercepted connection cleanly.
var errDone = errors.New("done")

// interceptOne forwards one request and its response. It returns nil when the connection
// may carry another, errDone when it ended cleanly, or what went wrong.
func (p *Proxy) interceptOne(cc *idleConn, cbr *bufio.Reader, cbw *bufio.Writer, upTLS *tls.Conn,
	lim *io.LimitedReader, ubr *bufio.Reader, host string, creds []Credential) error {
	cc.setHard(time.Time{})
	if _, err := cbr.Peek(1); err != nil {
		return errDone
	}
	cc.setHard(time.Now().Add(p.cfg.HandshakeTimeout))
	head, err := peekHead(cbr)
	if err != nil {
		if errors.Is(err, errHeadTooLarge) {
			writeSimple(cbw, http.StatusRequestHeaderFieldsTooLarge, "cordon: request head too large\n")
		}
		return fmt.Errorf("reading request: %w", err)
	}
	hosts := headHosts(head)
	req, err := http.ReadRequest(cbr)
	cc.setHard(time.Time{})
	if err != nil {
		writeSimple(cbw, http.StatusBadRequest, "cordon: malformed request\n")
		return fmt.Errorf("malformed request: %w", err)
	}
	if len(hosts) > 1 || !strings.HasPrefix(req.RequestURI, "/") {
		writeSimple(cbw, http.StatusBadRequest, "cordon: request must be in origin form with one host header\n")
		return errors.New("request not in origin form")
	}
	authority := req.Host
	if authority == "" {
		authority = host
	}
	if hh, _, err := splitAuthority(authority, 443); err != nil {
		writeSimple(cbw, http.StatusBadRequest, "cordon: bad host header\n")
		return errors.New("bad host header")
	} else if n, err := policy.Normalize(hh); err != nil || n != host {
		writeSimple(cbw, http.StatusMisdirectedRequest, "cordon: host header does not name the connected host\n")
		return fmt.Errorf("host header %s does not match %q", quoteBounded(authority), host)
	}
	body := newBodyCounter(req.Body)
	out := outgoing(context.Background(), req, authority, body)
	out.URL.Scheme = "https"
	back := inject(out.Header, creds)
	if strings.EqualFold(req.Header.Get("Expect"), "100-continue") {
		_, _ = cbw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
		_ = cbw.Flush()
	}
	if out.Body == nil {
		out.Body = http.NoBody
	}
	uw := bufio.NewWriterSize(upTLS, 4<<10)
	if err := out.Write(uw); err != nil {
		return fmt.Errorf("sending request: %w", err)
	}
	if err := uw.Flush(); err != nil {
		return fmt.Errorf("sending request: %w", err)
	}
	resp, err := p.finalResponse(cbw, lim, ubr, out, back)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := p.scrubResponse(resp, back); err != nil {
		writeSimple(cbw, http.StatusBadGateway, "cordon: the destination's response carried a credential; refused\n")
		return err
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		writeSimple(cbw, http.StatusBadGateway, "cordon: destination switched protocols unasked\n")
		return errors.New("destination switched protocols unasked")
	}
	if _, err := writeResponse(cbw, nil, nil, req, resp); err != nil {
		return err
	}
	if req.Close || resp.Close || !req.ProtoAtLeast(1, 1) || !body.eof.Load() {
		return errDone
	}
	return nil
}

// bufferedConn is a client connection whose first bytes may already sit in r.
type bufferedConn struct {
	*idleConn
	r *bufio.Reader
}

func (c *bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// maxInterim bounds the interim (1xx) responses the proxy takes before a request's
// final one (Go's own client takes 5).
const maxInterim = 5

// finalResponse reads the destination's response to out, relaying the interim (1xx)
// responses before it to the client, each scrubbed as a final one is: 103 Early Hints
// may echo the request's headers, and an interim left unread would be taken for the
// final response, which would then answer the next request on the connection. A 100
// Continue is not relayed: the proxy answers the client's expectation itself. 101
// Switching Protocols is final. On an error it has answered the client.
func (p *Proxy) finalResponse(cbw *bufio.Writer, lim *io.LimitedReader, ubr *bufio.Reader, out *http.Request, back []string) (*http.Response, error) {
	for n := 0; ; n++ {
		lim.N = maxHead
		resp, err := http.ReadResponse(ubr, out)
		if err != nil {
			writeSimple(cbw, http.StatusBadGateway, "cordon: bad response from destination\n")
			return nil, fmt.Errorf("reading response: %w", err)
		}
		lim.N = 1 << 62
		if resp.StatusCode/100 != 1 || resp.StatusCode == http.StatusSwitchingProtocols {
			return resp, nil
		}
		resp.Body.Close() // http.NoBody: an interim response has none
		if n == maxInterim {
			writeSimple(cbw, http.StatusBadGateway, "cordon: too many interim responses from destination\n")
			return nil, fmt.Errorf("more than %d interim responses", maxInterim)
		}
		if err := p.scrubResponse(resp, back); err != nil {
			writeSimple(cbw, http.StatusBadGateway, "cordon: the destination's response carried a credential; refused\n")
			return nil, err
		}
		if resp.StatusCode == http.StatusContinue {
			continue
		}
		if err := writeInterim(cbw, resp); err != nil {
			return nil, err
		}
	}
}

// writeInterim relays an interim response's status line and headers (hop-by-hop ones
// dropped).
func writeInterim(bw *bufio.Writer, resp *http.Response) error {
	text := strings.TrimPrefix(resp.Status, strconv.Itoa(resp.StatusCode)+" ")
	if text == "" || text == resp.Status {
		text = http.StatusText(resp.StatusCode)
	}
	h := resp.Header.Clone()
	stripHop(h)
	fmt.Fprintf(bw, "HTTP/1.1 %03d %s\r\n", resp.StatusCode, printable(text))
	if err := h.Write(bw); err != nil {
		return fmt.Errorf("writing an interim response: %w", err)
	}
	_, _ = bw.WriteString("\r\n")
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing an interim response: %w", err)
	}
	return nil
}
