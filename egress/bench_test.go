package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"

	"github.com/cordonhq/cordon/egress/policy"

	"github.com/cordonhq/cordon/internal/testutil"
)

// benchSize is the download of one BenchmarkProxyThroughput iteration.
const benchSize = 200 << 20

// benchHandler serves /big (benchSize bytes from one reused buffer, so the server costs
// little) and /small (a few bytes).
func benchHandler() http.Handler {
	block := make([]byte, 1<<20)
	io.ReadFull(testutil.RandReader(1), block)
	mux := http.NewServeMux()
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(benchSize))
		for range benchSize / len(block) {
			if _, err := w.Write(block); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/small", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("/sink", func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.CopyBuffer(io.Discard, r.Body, make([]byte, 256<<10))
		io.WriteString(w, strconv.FormatInt(n, 10))
	})
	return mux
}

// benchClients returns, by name, clients that reach the servers directly and through the
// proxy on a loopback listener (as in the sandbox): as an HTTP proxy (absolute-form for http,
// CONNECT for https) and as a SOCKS5 proxy.
func benchClients(b *testing.B) (plainURL, tlsURL string, clients map[string]*http.Client) {
	plain := httptest.NewServer(benchHandler())
	tlsSrv := httptest.NewTLSServer(benchHandler())
	b.Cleanup(plain.Close)
	b.Cleanup(tlsSrv.Close)
	e := startEnv(b, []policy.Rule{cidrRule(portOf(b, plain.URL), portOf(b, tlsSrv.URL))}, fakeResolver{}, Config{})
	pool := x509.NewCertPool()
	pool.AddCert(tlsSrv.Certificate())
	mk := func(proxy *url.URL) *http.Client {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
		if proxy != nil {
			tr.Proxy = http.ProxyURL(proxy)
		}
		b.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr}
	}
	tunnel := mk(nil)
	tunnel.Transport.(*http.Transport).DialContext = func(ctx context.Context, _, addr string) (net.Conn, error) {
		return dialConnect(ctx, e.addr, addr)
	}
	return plain.URL, tlsSrv.URL, map[string]*http.Client{
		"direct":  mk(nil),
		"proxy":   mk(&url.URL{Scheme: "http", Host: e.addr}),
		"socks5":  mk(&url.URL{Scheme: "socks5", Host: e.addr}),
		"connect": tunnel,
	}
}

// dialConnect opens a CONNECT tunnel to addr through the proxy at proxyAddr, so that
// plain HTTP can be measured through a tunnel without TLS.
func dialConnect(ctx context.Context, proxyAddr, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", proxyAddr)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", addr, addr)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 || br.Buffered() > 0 {
		c.Close()
		return nil, fmt.Errorf("connect %s: %v %v", addr, resp, err)
	}
	return c, nil
}

// BenchmarkProxyThroughput downloads 200 MB over loopback per iteration, directly and
// through the proxy (absolute-form, SOCKS5, and CONNECT with and without TLS);
// compare the MB/s columns.
func BenchmarkProxyThroughput(b *testing.B) {
	plainURL, tlsURL, clients := benchClients(b)
	for _, tc := range []struct{ name, client, url string }{
		{"http/direct", "direct", plainURL},
		{"http/proxy", "proxy", plainURL},
		{"http/socks5", "socks5", plainURL},
		{"http/connect", "connect", plainURL},
		{"https/direct", "direct", tlsURL},
		{"https/connect", "proxy", tlsURL},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c := clients[tc.client]
			b.SetBytes(benchSize)
			for b.Loop() {
				resp, err := c.Get(tc.url + "/big")
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || n != benchSize {
					b.Fatalf("downloaded %d bytes, %v", n, err)
				}
			}
		})
	}
}

// BenchmarkProxyUpload uploads 200 MB over loopback per iteration (a request body with
// Content-Length), directly and through the proxy; compare the MB/s columns.
func BenchmarkProxyUpload(b *testing.B) {
	plainURL, _, clients := benchClients(b)
	block := make([]byte, 1<<20)
	for _, name := range []string{"direct", "proxy", "connect"} {
		b.Run("http/"+name, func(b *testing.B) {
			c := clients[name]
			b.SetBytes(benchSize)
			for b.Loop() {
				body := io.MultiReader(repeat(block, benchSize/len(block))...)
				req, _ := http.NewRequest("POST", plainURL+"/sink", body)
				req.ContentLength = benchSize
				resp, err := c.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(got) != strconv.Itoa(benchSize) {
					b.Fatalf("server received %q bytes, want %d", got, benchSize)
				}
			}
		})
	}
}

// repeat returns n readers of block.
func repeat(block []byte, n int) []io.Reader {
	rs := make([]io.Reader, n)
	for i := range rs {
		rs[i] = bytes.NewReader(block)
	}
	return rs
}

// BenchmarkProxyLatency sends small requests on a kept-alive connection, directly and
// through the proxy; compare ns/op.
func BenchmarkProxyLatency(b *testing.B) {
	plainURL, tlsURL, clients := benchClients(b)
	for _, tc := range []struct{ name, client, url string }{
		{"http/direct", "direct", plainURL},
		{"http/proxy", "proxy", plainURL},
		{"http/socks5", "socks5", plainURL},
		{"http/connect", "connect", plainURL},
		{"https/direct", "direct", tlsURL},
		{"https/connect", "proxy", tlsURL},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c := clients[tc.client]
			for b.Loop() {
				resp, err := c.Get(tc.url + "/small")
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}
