// Package remote drives the sessions of a `cordon serve` daemon over its HTTP API
// (server/api): [Dial] a server, [Client.Start] a session in one of the tenant's
// workspaces, [Client.List] them, [Client.Open] one by id, and on a [Session] the
// same operations as on a local session.Session (Exec, Sweep, Checkpoint, Rollback,
// Stop), with the same results and the same errors: a *session.Error with the exit
// status `cordon exec` gives it, session.ErrNoSession for an id the server does not
// know. The client also reads and decides the tenant's gate requests, reads its runs'
// logs, and applies or discards their staged changes (runs.go), answering the
// documents the local `cordon gate`, `cordon audit` and `cordon apply` print. Every answer is read bounded, so a hostile server cannot make the client use
// unbounded memory. It is a package of its own so that cordon-exec, which links
// package session, links no HTTP or TLS.
package remote

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/paths"
)

// Limits on what a client reads and sends.
const (
	// MaxAnswer bounds a JSON answer (and an error's body).
	MaxAnswer = 4 << 20
	// maxBody is the server's limit on a request body: a bigger one is refused here,
	// before it is sent.
	maxBody = 1 << 20
	// maxToken bounds a token file.
	maxToken = 4 << 10
)

// Client is a connection to one server, with one credential. It is safe for
// concurrent use by multiple goroutines. It holds the token; it has no String.
type Client struct {
	host  string // as given, for messages
	base  string // the URL requests go to: https://HOST:PORT, or http://cordon over a socket
	token string // "" for none: a client certificate, or the unix socket's peer uid
	hc    *http.Client
}

// Option configures Dial.
type Option func(*dialer) error

type dialer struct {
	token             string
	caFile            string
	certFile, keyFile string
}

// Token authenticates with a bearer token (cordon serve token).
func Token(tok string) Option {
	return func(d *dialer) error {
		tok = strings.TrimSpace(tok)
		if tok == "" {
			return errdefs.Invalidf("an empty token")
		}
		if strings.ContainsAny(tok, " \t\r\n") || !isPrintable(tok) {
			return errdefs.Invalidf("a token is one word of printable characters")
		}
		d.token = tok
		return nil
	}
}

// TokenFile authenticates with the token in file, which must be the caller's own and
// readable by no one else (paths.ReadSecret): a token others can read is not a secret.
func TokenFile(file string) Option {
	return func(d *dialer) error {
		data, err := paths.ReadSecret(file, paths.Owner(), maxToken)
		if err != nil {
			return fmt.Errorf("token file: %w", err)
		}
		return Token(string(data))(d)
	}
}

// CA verifies the server's certificate against the CA certificates (PEM) in file,
// instead of the system's roots.
func CA(file string) Option {
	return func(d *dialer) error { d.caFile = file; return nil }
}

// ClientCert presents the client certificate in certFile (PEM, with its chain) and
// its key in keyFile.
func ClientCert(certFile, keyFile string) Option {
	return func(d *dialer) error { d.certFile, d.keyFile = certFile, keyFile; return nil }
}

// Dial makes a client of the server at host: https://HOST[:PORT] (TLS, verified), or
// unix:///PATH (the server's socket, where the peer's uid may be the credential; the
// server must run as root or as the caller: SO_PEERCRED is checked before a byte is
// sent).
// Plain http:// is refused: a token would cross the network in the clear. Dial
// checks its arguments and reads the files; it does not connect.
func Dial(host string, opts ...Option) (*Client, error) {
	var d dialer
	for _, o := range opts {
		if err := o(&d); err != nil {
			return nil, err
		}
	}
	u, err := parseHost(host)
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       30 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	c := &Client{host: host, token: d.token, hc: &http.Client{
		Transport: tr,
		// A redirect would carry the request elsewhere; the API has none.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
	switch u.Scheme {
	case "unix":
		if d.caFile != "" || d.certFile != "" {
			return nil, errdefs.Invalidf("%s: a unix socket has no TLS: no CA or client certificate", host)
		}
		// The request carries the token: only a server running as root or as the
		// caller may receive it (whoever could place a socket at the path must not).
		sock, uid := u.Path, os.Geteuid()
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return paths.DialSocket(ctx, sock, uid)
		}
		c.base = "http://cordon"
	case "https":
		cfg, err := d.tlsConfig()
		if err != nil {
			return nil, err
		}
		tr.TLSClientConfig = cfg
		tr.Proxy = http.ProxyFromEnvironment
		tr.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
		c.base = "https://" + u.Host
	}
	return c, nil
}

// parseHost checks host: https://HOST[:PORT] with nothing after it, or
// unix:///ABSOLUTE/PATH.
func parseHost(host string) (*url.URL, error) {
	bad := func(why string) error {
		return errdefs.Invalidf("--host %q: %s (https://HOST:PORT or unix:///PATH)", host, why)
	}
	u, err := url.Parse(host)
	if err != nil || u.Scheme == "" {
		return nil, bad("not a URL")
	}
	switch u.Scheme {
	case "https":
		if u.Host == "" || u.Hostname() == "" {
			return nil, bad("no host")
		}
		if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
			return nil, bad("only a scheme, a host and a port")
		}
	case "unix":
		if u.Host != "" || !filepath.IsAbs(u.Path) || u.RawQuery != "" || u.Fragment != "" {
			return nil, bad("a unix socket is unix:// and an absolute path")
		}
	case "http", "tcp":
		return nil, bad("cordon serve answers TCP with TLS only; use https://")
	default:
		return nil, bad("unknown scheme " + u.Scheme)
	}
	return u, nil
}

func (d *dialer) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	if d.caFile != "" {
		pem, err := readBounded(d.caFile)
		if err != nil {
			return nil, fmt.Errorf("CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errdefs.Invalidf("CA file %s: no PEM certificate in it", d.caFile)
		}
		cfg.RootCAs = pool
	}
	if (d.certFile == "") != (d.keyFile == "") {
		return nil, errdefs.Invalidf("a client certificate needs both its certificate and its key")
	}
	if d.certFile != "" {
		cert, err := tls.LoadX509KeyPair(d.certFile, d.keyFile)
		if err != nil {
			return nil, errdefs.Invalidf("client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// readBounded reads a PEM file of at most MaxAnswer bytes.
func readBounded(file string) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxAnswer+1))
	if len(data) > MaxAnswer {
		return nil, errdefs.Invalidf("%s is over %d bytes", file, MaxAnswer)
	}
	return data, err
}

func isPrintable(s string) bool {
	for _, r := range s {
		if r < 0x21 || r > 0x7e {
			return false
		}
	}
	return true
}
