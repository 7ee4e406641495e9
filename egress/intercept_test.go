package egress

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/egress/policy"
	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/internal/secret"
)

const (
	testPlaceholder = "tok_PLACEHOLDERplaceholder0123"
	testReal        = "tok_REALsecretREALsecret98765"
)

// withPolicy starts a proxy that allows 127.0.0.0/8 on tlsSrv's port and injects testReal
// for example.com (resolved to 127.0.0.1), verifying destinations with roots (tlsSrv's own
// certificate when nil).
func withPolicy(t *testing.T, tlsSrv *httptest.Server, roots *x509.CertPool) (*env, *CA) {
	t.Helper()
	ca, err := NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	if roots == nil {
		roots = x509.NewCertPool()
		roots.AddCert(tlsSrv.Certificate())
	}
	e := startEnv(t, []policy.Rule{cidrRule(portOf(t, tlsSrv.URL))}, fakeResolver{"example.com": addrs("127.0.0.1")}, Config{
		Intercept: &Intercept{CA: ca, RootCAs: roots, Credentials: []Credential{
			{Name: "API_TOKEN", Hosts: []string{"Example.COM"}, Placeholder: testPlaceholder, Value: secret.New(testReal)},
		}},
	})
	return e, ca
}

// clientFor returns a client through the proxy that trusts the given roots.
func clientFor(t *testing.T, e *env, roots ...*x509.Certificate) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	for _, c := range roots {
		pool.AddCert(c)
	}
	tr := &http.Transport{
		Proxy:           http.ProxyURL(&url.URL{Scheme: "http", Host: e.addr}),
		TLSClientConfig: &tls.Config{RootCAs: pool},
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

func getHeaders(t *testing.T, c *http.Client, rawURL string, h map[string]string) (string, *http.Response) {
	t.Helper()
	req, err := http.NewRequest("GET", rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", rawURL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), resp
}

func TestInterceptInjectsCredentialForItsHostOnly(t *testing.T) {
	_, tlsSrv := servers(t)
	e, ca := withPolicy(t, tlsSrv, nil)
	port := portOf(t, tlsSrv.URL)

	// The intercepted host: the client trusts only the run CA, and the destination gets
	// the real value in place of the placeholder, wherever it was in the headers.
	c := clientFor(t, e, ca.Certificate())
	body, resp := getHeaders(t, c, fmt.Sprintf("https://example.com:%d/headers", port), map[string]string{
		"Authorization": "Bearer " + testPlaceholder,
		"X-Api-Key":     testPlaceholder,
		"X-Other":       "kept",
	})
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if got := resp.TLS.PeerCertificates[0]; got.CheckSignatureFrom(ca.Certificate()) != nil {
		t.Errorf("intercepted connection not served with a run CA certificate (issuer %s)", got.Issuer)
	}
	for _, want := range []string{"Authorization: Bearer " + testReal, "X-Api-Key: " + testReal, "X-Other: kept"} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("destination did not get %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, testPlaceholder) {
		t.Errorf("placeholder reached the destination:\n%s", body)
	}
	c.CloseIdleConnections()
	typ, ev := e.events.nth(t, 1)
	if typ != event.NetAllow || !ev.Intercepted || ev.Requests != 1 || ev.Host != "example.com" {
		t.Errorf("event %s %+v, want net.allow intercepted with 1 request", typ, ev)
	}
	if strings.Contains(fmt.Sprintf("%+v", ev), testReal) {
		t.Error("the value is in the event")
	}

	// Another host (the same server by address) is tunnelled untouched: the client sees
	// the server's own certificate, and the placeholder arrives as it was sent.
	c2 := clientFor(t, e, tlsSrv.Certificate())
	body, resp = getHeaders(t, c2, fmt.Sprintf("https://127.0.0.1:%d/headers", port), map[string]string{
		"Authorization": "Bearer " + testPlaceholder,
	})
	if !resp.TLS.PeerCertificates[0].Equal(tlsSrv.Certificate()) {
		t.Error("a host outside hosts was intercepted")
	}
	if !strings.Contains(body, "Authorization: Bearer "+testPlaceholder+"\n") || strings.Contains(body, testReal) {
		t.Errorf("non-intercepted host: want the placeholder unchanged:\n%s", body)
	}
	c2.CloseIdleConnections()
	typ, ev = e.events.nth(t, 2)
	if typ != event.NetAllow || ev.Intercepted {
		t.Errorf("event %s %+v, want net.allow not intercepted", typ, ev)
	}
}

func TestInterceptReplacesClientAuthorization(t *testing.T) {
	_, tlsSrv := servers(t)
	e, ca := withPolicy(t, tlsSrv, nil)
	u := fmt.Sprintf("https://example.com:%d/headers", portOf(t, tlsSrv.URL))
	c := clientFor(t, e, ca.Certificate())
	basic := func(s string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(s)) }
	for _, tc := range []struct {
		name string
		h    map[string]string
		want string
	}{
		{"none", nil, "Bearer " + testReal},
		{"someone else's", map[string]string{"Authorization": "Bearer stolen-elsewhere"}, "Bearer " + testReal},
		{"token scheme", map[string]string{"Authorization": "token " + testPlaceholder}, "token " + testReal},
		{"basic", map[string]string{"Authorization": basic("x-access-token:" + testPlaceholder)}, basic("x-access-token:" + testReal)},
		{"proxy-authorization", map[string]string{"Proxy-Authorization": "Basic Zm9vOmJhcg=="}, "Bearer " + testReal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, _ := getHeaders(t, c, u, tc.h)
			if n := strings.Count(body, "Authorization: "); n != 1 {
				t.Errorf("want exactly one authorization header, got %d:\n%s", n, body)
			}
			if !strings.Contains(body, "\nAuthorization: "+tc.want+"\n") && !strings.HasPrefix(body, "Authorization: "+tc.want+"\n") {
				t.Errorf("want Authorization: %s, got:\n%s", tc.want, body)
			}
			if strings.Contains(body, "Proxy-Authorization") || strings.Contains(body, "stolen") {
				t.Errorf("client auth header forwarded:\n%s", body)
			}
		})
	}
}

func TestInterceptUnverifiedDestinationDenied(t *testing.T) {
	_, tlsSrv := servers(t)
	e, ca := withPolicy(t, tlsSrv, x509.NewCertPool()) // trusts nothing
	c := clientFor(t, e, ca.Certificate())
	_, err := c.Get(fmt.Sprintf("https://example.com:%d/headers", portOf(t, tlsSrv.URL)))
	if err == nil {
		t.Fatal("request to an unverified destination succeeded")
	}
	typ, ev := e.events.nth(t, 1)
	if typ != event.NetDeny || !strings.Contains(ev.Reason, "tls verification") {
		t.Errorf("event %s %+v, want net.deny for tls verification", typ, ev)
	}
}

func TestInterceptRefusesOtherServerName(t *testing.T) {
	_, tlsSrv := servers(t)
	e, ca := withPolicy(t, tlsSrv, nil)
	conn, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "CONNECT example.com:%d HTTP/1.1\r\nHost: example.com\r\n\r\n", portOf(t, tlsSrv.URL))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Certificate())
	tc := tls.Client(conn, &tls.Config{ServerName: "evil.example.net", RootCAs: pool})
	tc.SetDeadline(time.Now().Add(10 * time.Second))
	err = tc.Handshake()
	if err == nil {
		t.Fatal("handshake for another server name succeeded")
	}
	if !strings.Contains(err.Error(), "tls: access denied") {
		t.Errorf("handshake error %q; want the proxy's access_denied alert", err)
	}
	typ, ev := e.events.nth(t, 1)
	if typ != event.NetDeny || !strings.Contains(ev.Reason, "does not match") || ev.Category != policy.ServerNameMismatch.String() {
		t.Errorf("event %s %+v, want net.deny for the server name", typ, ev)
	}
}

func TestInterceptConfigValidated(t *testing.T) {
	ca, err := NewCA("x")
	if err != nil {
		t.Fatal(err)
	}
	for name, ic := range map[string]*Intercept{
		"no CA":         {Credentials: []Credential{{Name: "A", Hosts: []string{"a.com"}, Placeholder: testPlaceholder, Value: secret.New(testReal)}}},
		"no hosts":      {CA: ca, Credentials: []Credential{{Name: "A", Placeholder: testPlaceholder, Value: secret.New(testReal)}}},
		"short":         {CA: ca, Credentials: []Credential{{Name: "A", Hosts: []string{"a.com"}, Placeholder: "x", Value: secret.New(testReal)}}},
		"same as value": {CA: ca, Credentials: []Credential{{Name: "A", Hosts: []string{"a.com"}, Placeholder: testReal, Value: secret.New(testReal)}}},
		"bad host":      {CA: ca, Credentials: []Credential{{Name: "A", Hosts: []string{"a b"}, Placeholder: testPlaceholder, Value: secret.New(testReal)}}},
	} {
		if _, err := New(Config{Intercept: ic}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestInterceptOverSOCKS5(t *testing.T) {
	_, tlsSrv := servers(t)
	e, ca := withPolicy(t, tlsSrv, nil)
	conn, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if rep := socksConnect(t, conn, socksCmdConnect, socksName("example.com"), portOf(t, tlsSrv.URL)); rep != socksOK {
		t.Fatalf("socks reply %s", socksReplyName(rep))
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Certificate())
	tc := tls.Client(conn, &tls.Config{ServerName: "example.com", RootCAs: pool})
	tc.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(tc, "GET /headers HTTP/1.1\r\nHost: example.com\r\nX-Key: %s\r\nConnection: close\r\n\r\n", testPlaceholder)
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), "X-Key: "+testReal+"\n") || !strings.Contains(string(body), "Authorization: Bearer "+testReal+"\n") {
		t.Errorf("destination did not get the value:\n%s", body)
	}
	typ, ev := e.events.nth(t, 1)
	if typ != event.NetAllow || !ev.Intercepted || ev.Proto != protoSOCKS {
		t.Errorf("event %s %+v", typ, ev)
	}
}

func TestInterceptWrongHostHeaderRefused(t *testing.T) {
	_, tlsSrv := servers(t)
	e, ca := withPolicy(t, tlsSrv, nil)
	conn, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "CONNECT example.com:%d HTTP/1.1\r\nHost: example.com\r\n\r\n", portOf(t, tlsSrv.URL))
	br := bufio.NewReader(conn)
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Certificate())
	tc := tls.Client(conn, &tls.Config{ServerName: "example.com", RootCAs: pool})
	tc.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprint(tc, "GET /headers HTTP/1.1\r\nHost: other.example.net\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("status %d, want 421", resp.StatusCode)
	}
}

// TestCredentialNotPrinted: the proxy's credentials hold the value opaque, so a log
// line or an error that prints them shows no secret.
func TestCredentialNotPrinted(t *testing.T) {
	c := Credential{Name: "A", Hosts: []string{"a.com"}, Placeholder: testPlaceholder, Value: secret.New(testReal)}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		if out := fmt.Sprintf(verb, Intercept{Credentials: []Credential{c}}); strings.Contains(out, testReal) {
			t.Errorf("Sprintf(%s) = %s", verb, out)
		}
	}
}
