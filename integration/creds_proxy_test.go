package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// testPKI is a CA and a server certificate for the given IP addresses, with the CA's PEM
// written to a file (for the host's SSL_CERT_FILE: the proxy verifies destinations with
// the host's roots).
func testPKI(t *testing.T, ips ...string) (tls.Certificate, string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "integration test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "test server"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
	}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "test-ca.pem")
	mustWrite(t, caFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})))
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, caFile
}

// authServer is an HTTPS server on addr that records the Authorization header of each
// request to /whoami and calls check with it, during the request.
type authServer struct {
	port string
	mu   sync.Mutex
	got  []string
}

func newAuthServer(t *testing.T, addr string, cert tls.Certificate, check func(auth string)) *authServer {
	t.Helper()
	s := &authServer{}
	mux := http.NewServeMux()
	mux.HandleFunc("/whoami", func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		s.mu.Lock()
		s.got = append(s.got, auth)
		s.mu.Unlock()
		if check != nil {
			check(auth)
		}
		io.WriteString(w, "hello, authorised client\n")
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening on %s: %v", addr, err)
	}
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: mux, ErrorLog: log.New(io.Discard, "", 0)}}
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	_, s.port, _ = net.SplitHostPort(ln.Addr().String())
	return s
}

func (s *authServer) received() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got...)
}

func TestCredentialDeliveredByProxy(t *testing.T) {
	w := newWorld(t)
	cert, caFile := testPKI(t, "127.0.0.2", "127.0.0.3")
	w.env = append(w.env, "SSL_CERT_FILE="+caFile)
	var verifyCode = -1
	api := newAuthServer(t, "127.0.0.2:0", cert, func(auth string) {
		// The token the destination received is valid while the run lives.
		verifyCode = w.verifyToken(strings.TrimPrefix(auth, "Bearer ")).code
	})
	other := newAuthServer(t, "127.0.0.3:0", cert, nil)
	w.contract(fmt.Sprintf(`version: 1
network:
  allow:
    - {cidr: 127.0.0.0/8, ports: [%s, %s], why: test servers}
credentials:
  - {name: API_TOKEN, provider: local, deliver: proxy, hosts: [127.0.0.2], scope: {scopes: [read]}, why: call the API}
`, api.port, other.port))
	// No -k: the run CA (and the host's roots) are trusted through the bundle.
	r := w.sh(`echo "$API_TOKEN" > env.tok; env > env.txt
curl -sS --fail --max-time 20 -H "Authorization: Bearer $API_TOKEN" https://127.0.0.2:` + api.port + `/whoami &&
curl -sS --fail --max-time 20 -H "Authorization: Bearer $API_TOKEN" https://127.0.0.3:` + other.port + `/whoami`)
	if r.code != 0 {
		t.Fatalf("%v", r)
	}
	if n := strings.Count(r.stdout, "hello, authorised client"); n != 2 {
		t.Fatalf("want 2 answers, got %d: %v", n, r)
	}
	data, _ := os.ReadFile(filepath.Join(w.ws, "env.tok"))
	placeholder := strings.TrimSpace(string(data))
	gotAPI, gotOther := api.received(), other.received()
	if len(gotAPI) != 1 || len(gotOther) != 1 {
		t.Fatalf("requests: api %d, other %d", len(gotAPI), len(gotOther))
	}
	real := strings.TrimPrefix(gotAPI[0], "Bearer ")
	if !strings.HasPrefix(real, "cordon_") || !strings.HasPrefix(placeholder, "cordon_") || real == placeholder ||
		len(real) != len(placeholder) {
		t.Fatalf("want a real token at the API and a placeholder of its shape in the sandbox, got %q and %q", real, placeholder)
	}
	if verifyCode != 0 {
		t.Errorf("the token the API received was not valid during the run (verify exit %d)", verifyCode)
	}
	// Sent anywhere else, the placeholder arrives unchanged, and is worth nothing.
	if gotOther[0] != "Bearer "+placeholder {
		t.Errorf("non-intercepted host got %q, want the placeholder", gotOther[0])
	}
	if v := w.verifyToken(placeholder); v.code == 0 {
		t.Errorf("the placeholder verifies as a token: %v", v)
	}
	// The sandbox never held the value, and was pointed at the bundle.
	envTxt, _ := os.ReadFile(filepath.Join(w.ws, "env.txt"))
	if strings.Contains(string(envTxt), real) {
		t.Error("the real token is in the sandbox's environment")
	}
	for _, k := range []string{"SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "GIT_SSL_CAINFO", "CURL_CA_BUNDLE"} {
		assertContains(t, "sandbox env", string(envTxt), k+"=/run/cordon/secrets/ca-bundle.pem\n")
	}
	// Revoked with the run, and nowhere in the log; the interception is recorded.
	if v := w.verifyToken(real); v.code != 1 {
		t.Errorf("token still valid after the run: %v", v)
	}
	intercepted := 0
	for _, rec := range lastRun(t, w) {
		if strings.Contains(string(rec.Body), real) {
			t.Errorf("the real token is in the audit log (%s)", rec.Type)
		}
		if rec.Type == "net.allow" && strings.Contains(string(rec.Body), `"intercepted":true`) {
			intercepted++
			assertContains(t, "net.allow", string(rec.Body), `"host":"127.0.0.2"`)
		}
	}
	if intercepted != 1 {
		t.Errorf("want 1 intercepted net.allow, got %d", intercepted)
	}
}
