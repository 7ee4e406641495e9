package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/internal/testutil"
	"github.com/cordonhq/cordon/session/wire"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue makes a leaf certificate for cn (with dns as SANs), for a server or a client.
func (ca *testCA) issue(t *testing.T, cn string, server bool, dns ...string) (tls.Certificate, []byte, []byte) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn}, DNSNames: dns,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return pair, certPEM, keyPEM
}

// served is one running `cordon serve`.
type served struct {
	cmd     *exec.Cmd
	file    string // its config
	sock    string
	addr    string // the TCP listener's host:port
	stderr  *syncBuffer
	done    chan error
	tokens  map[string]string // by tenant: its agent token
	ca      *testCA
	metrics chan string // the metrics listener's host:port, once it listens (each launch)
}

// newToken asks the binary for a token and its config line.
func newToken(t *testing.T) (token, sum string) {
	t.Helper()
	out, err := exec.Command(testutil.Cordon(t), "serve", "token").Output()
	if err != nil {
		t.Fatalf("cordon serve token: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[1], "token_sha256: ") {
		t.Fatalf("cordon serve token printed %q", out)
	}
	return lines[0], strings.TrimPrefix(lines[1], "token_sha256: ")
}

// startServe writes a config with two tenants (acme: an agent token, an approver and
// auditor certificate, uid 0 as auditor; beta: an agent token, an approver and auditor
// certificate) and starts the real binary. A tenant's root is DIR/NAME beside the
// socket's DIR/run.
func startServe(t *testing.T) *served {
	t.Helper()
	return startServeWith(t, "")
}

// startServeWith is startServe with acme's tenant entry given more keys: YAML lines
// indented as its keys ("    pools: [{name: default, size: 1}]\n").
func startServeWith(t *testing.T, acme string) *served {
	t.Helper()
	return startServeListen(t, "", acme)
}

// startServeListen is startServeWith with listen lines (indented as keys of listen)
// added to the config's listen.
func startServeListen(t *testing.T, listen, acme string) *served {
	t.Helper()
	testutil.RequireRoot(t)
	dir := shortTempDir(t)
	if err := os.Chmod(dir, 0o711); err != nil { // other users reach the socket below
		t.Fatal(err)
	}
	ca := newTestCA(t, "cordon test CA")
	_, certPEM, keyPEM := ca.issue(t, "cordon-server", true)
	for name, data := range map[string][]byte{"ca.pem": ca.pem, "server.pem": certPEM, "server.key": keyPEM} {
		mustWrite(t, filepath.Join(dir, name), string(data))
	}
	acmeTok, acmeSum := newToken(t)
	betaTok, betaSum := newToken(t)
	s := &served{sock: filepath.Join(dir, "run", "cordon.sock"),
		tokens: map[string]string{"acme": acmeTok, "beta": betaTok}, ca: ca}
	cfg := fmt.Sprintf(`version: 1
listen:
  unix: {path: %s, mode: "0666"}
  tcp: {address: "127.0.0.1:0", cert: %s, key: %s, client_ca: %s}
  metrics: {address: "127.0.0.1:0"}
%stenants:
  - name: acme
    root: %s
    credentials:
      - {name: ci, roles: [agent], token_sha256: %s}
      - {name: lead, roles: [approver, auditor], client_cert: {common_name: lead.acme}}
      - {name: root, roles: [auditor], uid: 0}
%s  - name: beta
    root: %s
    credentials:
      - {name: ci, roles: [agent], token_sha256: %s}
      - {name: lead, roles: [approver, auditor], client_cert: {common_name: lead.beta}}
`, s.sock, filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key"), filepath.Join(dir, "ca.pem"),
		listen, filepath.Join(dir, "acme"), acmeSum, acme, filepath.Join(dir, "beta"), betaSum)
	s.file = filepath.Join(dir, "serve.yaml")
	mustWrite(t, s.file, cfg)
	s.launch(t)
	return s
}

// launch starts the binary on s's config and waits until it listens.
// syncBuffer is the daemon's stderr as it is written: read by the test while the
// reading goroutine still appends to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func (s *served) launch(t *testing.T) {
	t.Helper()
	s.stderr, s.done, s.metrics = &syncBuffer{}, make(chan error, 1), make(chan string, 1)
	s.cmd = exec.Command(testutil.Cordon(t), "serve", "--config", s.file)
	pipe, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	cmd, stderr, done, metrics := s.cmd, s.stderr, s.done, s.metrics
	var exited atomic.Bool // set once Wait has returned (ProcessState is Wait's to write)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			stderr.Write(append(sc.Bytes(), '\n'))
			var line struct{ Msg, Listener, Addr string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "listening" && line.Listener == "tcp" {
				ready <- line.Addr
			}
			if line.Msg == "listening" && line.Listener == "metrics" {
				metrics <- line.Addr
			}
		}
		close(ready)
		err := cmd.Wait()
		exited.Store(true)
		done <- err
	}()
	top := filepath.Dir(s.file)
	t.Cleanup(func() {
		// Gracefully, so the daemon retires its warm sessions (a kill leaves them
		// running for the next start, which a test's end never makes); then every
		// session still running in a tenant's run root is stopped: nothing a test
		// started outlives it.
		if !exited.Load() {
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(time.Minute):
				cmd.Process.Kill()
				<-done
			}
		}
		stopLeftSessions(t, top)
	})
	select {
	case addr, ok := <-ready:
		if !ok {
			t.Fatalf("cordon serve exited before listening:\n%s", s.stderr)
		}
		s.addr = addr
	case <-time.After(30 * time.Second):
		t.Fatalf("cordon serve is not listening after 30s:\n%s", s.stderr)
	}
}

// stopLeftSessions stops every session still running in the run root of each tenant
// under top (TOP/TENANT/run).
func stopLeftSessions(t *testing.T, top string) {
	roots, _ := filepath.Glob(filepath.Join(top, "*", "run"))
	for _, root := range roots {
		for _, si := range wire.List(paths.Root(root).Sessions()) {
			cmd := exec.Command(testutil.Cordon(t), "session", "stop", si.ID)
			cmd.Env = append(cmd.Environ(), paths.RunRootEnv+"="+root)
			_ = cmd.Run()
		}
	}
}

// client is an HTTPS client trusting the test CA, presenting cert when given.
func (s *served) client(certs ...tls.Certificate) *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(s.ca.cert)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: certs, MinVersion: tls.VersionTLS12},
	}}
}

// do sends one request and returns the status, the body and the response headers.
func do(t *testing.T, c *http.Client, method, url, token string, body io.Reader, header ...string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, strings.TrimSpace(string(b)), resp.Header
}

const unauthorized = `{"error":"unauthorized"}`

// TestServeAuth drives a real `cordon serve` with real clients: Go's HTTPS client with
// tokens and client certificates, curl on the unix socket as root and as nobody.
func TestServeAuth(t *testing.T) {
	s := startServe(t)
	t.Run("health needs no credential", func(t *testing.T) { serveHealth(t, s) })
	t.Run("no credential, a wrong token, another scheme: 401 with no detail", func(t *testing.T) { serveRefusesBadTokens(t, s) })
	t.Run("a token answers for its own tenant only", func(t *testing.T) { serveTokenTenants(t, s) })
	t.Run("a client certificate of the CA maps to its credential", func(t *testing.T) { serveClientCert(t, s) })
	t.Run("a certificate of another CA is refused in the handshake", func(t *testing.T) { serveForgedCert(t, s) })
	t.Run("TLS below 1.2 is refused", func(t *testing.T) { serveOldTLS(t, s) })
	t.Run("unix socket: root by its uid, nobody refused", func(t *testing.T) { serveUnixPeers(t, s) })
	t.Run("hostile requests get a 4xx", func(t *testing.T) { serveHostileRequests(t, s) })
	t.Run("a slow header is cut off", func(t *testing.T) { serveSlowHeader(t, s) })
	t.Run("SIGTERM stops it and removes the socket", func(t *testing.T) { serveStop(t, s) })
}

// serveHealth: health needs no credential.
func serveHealth(t *testing.T, s *served) {
	base, anon := "https://"+s.addr, s.client()
	if code, body, _ := do(t, anon, "GET", base+"/v1/health", "", nil); code != 200 || body != `{"ok":true}` {
		t.Errorf("got %d %s; want 200 {\"ok\":true}", code, body)
	}
}

// serveRefusesBadTokens: no credential, a wrong token, another scheme: 401 with no detail.
func serveRefusesBadTokens(t *testing.T, s *served) {
	base, anon := "https://"+s.addr, s.client()
	for _, tok := range []string{"", "not-a-token", s.tokens["acme"] + "x", s.tokens["acme"][:10]} {
		code, body, h := do(t, anon, "GET", base+"/v1/whoami", tok, nil)
		if code != 401 || body != unauthorized || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("token %q: got %d %s (WWW-Authenticate %q); want 401 %s with Bearer", tok, code, body, h.Get("WWW-Authenticate"), unauthorized)
		}
	}
	code, body, _ := do(t, anon, "GET", base+"/v1/whoami", "", nil, "Authorization", "Basic "+s.tokens["acme"])
	if code != 401 || body != unauthorized {
		t.Errorf("Basic scheme: got %d %s; want 401", code, body)
	}
}

// serveTokenTenants: a token answers for its own tenant only.
func serveTokenTenants(t *testing.T, s *served) {
	base, anon := "https://"+s.addr, s.client()
	for tenant, tok := range s.tokens {
		code, body, _ := do(t, anon, "GET", base+"/v1/whoami", tok, nil)
		want := `{"tenant":"` + tenant + `","credential":"ci","roles":["agent"]}`
		if code != 200 || body != want {
			t.Errorf("%s's token: got %d %s; want 200 %s", tenant, code, body, want)
		}
	}
}

// serveClientCert: a client certificate of the CA maps to its credential.
func serveClientCert(t *testing.T, s *served) {
	base := "https://" + s.addr
	lead, _, _ := s.ca.issue(t, "lead.acme", false)
	code, body, _ := do(t, s.client(lead), "GET", base+"/v1/whoami", "", nil)
	if want := `{"tenant":"acme","credential":"lead","roles":["approver","auditor"]}`; code != 200 || body != want {
		t.Errorf("got %d %s; want 200 %s", code, body, want)
	}
	// The approver may not start a session: roles hold within the tenant.
	if code, _, _ := do(t, s.client(lead), "POST", base+"/v1/sessions", "", strings.NewReader(`{}`), "Content-Type", "application/json"); code != 403 {
		t.Errorf("approver starting a session: got %d; want 403", code)
	}
	unknown, _, _ := s.ca.issue(t, "eve.acme", false)
	if code, body, _ := do(t, s.client(unknown), "GET", base+"/v1/whoami", "", nil); code != 401 || body != unauthorized {
		t.Errorf("a CA certificate no credential names: got %d %s; want 401", code, body)
	}
}

// serveForgedCert: a certificate of another CA is refused in the handshake.
func serveForgedCert(t *testing.T, s *served) {
	base := "https://" + s.addr
	forged, _, _ := newTestCA(t, "evil CA").issue(t, "lead.acme", false)
	req, _ := http.NewRequest("GET", base+"/v1/whoami", nil)
	c := s.client()
	// Go's client sends no certificate the server's CA list does not name: force it.
	c.Transport.(*http.Transport).TLSClientConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		return &forged, nil
	}
	if resp, err := c.Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("a certificate for lead.acme from another CA: got %d; want the handshake refused", resp.StatusCode)
	}
}

// serveOldTLS: TLS below 1.2 is refused.
func serveOldTLS(t *testing.T, s *served) {
	c, err := tls.Dial("tcp", s.addr, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11})
	if err == nil {
		c.Close()
		t.Error("a TLS 1.1 handshake succeeded")
	}
}

// serveUnixPeers: unix socket: root by its uid, nobody refused.
func serveUnixPeers(t *testing.T, s *served) {
	curl := []string{"curl", "-sS", "--max-time", "10", "-w", "%{http_code}", "--unix-socket", s.sock, "http://cordon/v1/whoami"}
	out, err := exec.Command(curl[0], curl[1:]...).Output()
	if want := `{"tenant":"acme","credential":"root","roles":["auditor"]}` + "\n200"; err != nil || strings.TrimSpace(string(out)) != want {
		t.Errorf("curl as root: %v %q; want %q", err, out, want)
	}
	args := append([]string{"--reuid=65534", "--regid=65534", "--clear-groups"}, curl...)
	out, err = exec.Command("setpriv", args...).Output()
	if want := unauthorized + "\n401"; err != nil || strings.TrimSpace(string(out)) != want {
		t.Errorf("curl as uid 65534: %v %q; want %q", err, out, want)
	}
	// A token on the socket stands for its own credential, whoever the peer is.
	args = append(args[:len(args)-1], "-H", "Authorization: Bearer "+s.tokens["beta"], "http://cordon/v1/whoami")
	out, err = exec.Command("setpriv", args...).Output()
	if want := `{"tenant":"beta","credential":"ci","roles":["agent"]}` + "\n200"; err != nil || strings.TrimSpace(string(out)) != want {
		t.Errorf("curl as uid 65534 with beta's token: %v %q; want %q", err, out, want)
	}
}

// serveHostileRequests: hostile requests get a 4xx.
func serveHostileRequests(t *testing.T, s *served) {
	base, anon := "https://"+s.addr, s.client()
	tok := s.tokens["acme"]
	json := []string{"Content-Type", "application/json"}
	big := strings.Repeat("x", 2<<20)
	if code, _, _ := do(t, anon, "POST", base+"/v1/sessions", tok, strings.NewReader(`{"contract":"`+big+`"}`), json...); code != 413 {
		t.Errorf("a 2 MiB body with its length: got %d; want 413", code)
	}
	chunked := io.MultiReader(strings.NewReader(`{"contract":"`), strings.NewReader(big), strings.NewReader(`"}`))
	if code, _, _ := do(t, anon, "POST", base+"/v1/sessions", tok, chunked, json...); code != 413 {
		t.Errorf("a 2 MiB chunked body: got %d; want 413", code)
	}
	for body, want := range map[string]int{`{"contract":"","extra":1}`: 400, `{"contract":""}{}`: 400, `{"contract":`: 400, `{"contract":"","workspace":".dot"}`: 400} {
		if code, got, _ := do(t, anon, "POST", base+"/v1/sessions", tok, strings.NewReader(body), json...); code != want {
			t.Errorf("body %s: got %d %s; want %d", body, code, got, want)
		}
	}
	if code, _, _ := do(t, anon, "POST", base+"/v1/sessions", tok, strings.NewReader(`{}`), "Content-Type", "text/plain"); code != 415 {
		t.Errorf("text/plain body: got %d; want 415", code)
	}
	if code, _, _ := do(t, anon, "GET", base+"/v1/nothing", tok, nil); code != 404 {
		t.Errorf("unknown route: got %d; want 404", code)
	}
	if code, _, h := do(t, anon, "DELETE", base+"/v1/whoami", tok, nil); code != 405 || h.Get("Allow") == "" {
		t.Errorf("DELETE /v1/whoami: got %d (Allow %q); want 405 with Allow", code, h.Get("Allow"))
	}
}

// serveSlowHeader: a slow header is cut off.
func serveSlowHeader(t *testing.T, s *served) {
	c, err := net.Dial("unix", s.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if _, err := io.WriteString(c, "GET /v1/health HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err = io.ReadAll(c) // the server closes the connection (perhaps after a 408)
	if elapsed := time.Since(start); err != nil || elapsed > 20*time.Second {
		t.Errorf("a header never finished: read %v after %s; want the connection closed by the server", err, elapsed)
	}
}

// serveStop: SIGTERM stops it and removes the socket.
func serveStop(t *testing.T, s *served) {
	s.cmd.Process.Signal(syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("cordon serve after SIGTERM: %v\n%s", err, s.stderr)
		}
	case <-ctx.Done():
		t.Fatalf("cordon serve still running 30s after SIGTERM")
	}
	if _, err := os.Lstat(s.sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket after stop: %v; want it removed", err)
	}
}

// TestServeConfigErrors: an invalid config is refused before anything listens, every
// problem printed as FILE:LINE:COL, exit 1; --check says valid and exits 0.
func TestServeConfigErrors(t *testing.T) {
	dir := shortTempDir(t)
	bad := filepath.Join(dir, "bad.yaml")
	mustWrite(t, bad, `version: 1
listen:
  tcp: {address: "127.0.0.1:0"}
tenants:
  - name: acme
    root: /srv/acme
    credentials:
      - {name: ci, roles: [agent, approver], uid: 0}
      - {name: ci, roles: [auditor], uid: 1, extra: x}
`)
	out, err := exec.Command(testutil.Cordon(t), "serve", "--config", bad).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("invalid config: %v; want exit 1\n%s", err, out)
	}
	want := bad + `:9:46: credential: unknown key "extra" (known: name, roles, token_sha256, client_cert, uid)
` + bad + `:3:8: listen.tcp: a TCP listener needs TLS: set "cert" and "key" (tokens must never cross a network in clear)
` + bad + `:8:9: credential "ci": both agent and approver; the credential an agent runs with must never approve its own gate, so give approval to a separate credential
` + bad + `:9:9: credential "ci": the name is already used in tenant "acme" at line 8
`
	if string(out) != want {
		t.Errorf("got:\n%s\nwant:\n%s", out, want)
	}
	good := filepath.Join(dir, "good.yaml")
	mustWrite(t, good, "version: 1\nlisten: {unix: {path: "+filepath.Join(dir, "s.sock")+"}}\ntenants: [{name: a, root: /srv/a}]\n")
	out, err = exec.Command(testutil.Cordon(t), "serve", "--config", good, "--check").CombinedOutput()
	if err != nil || string(out) != good+": valid\n" {
		t.Errorf("--check: %v %q; want %q", err, out, good+": valid\n")
	}
}
