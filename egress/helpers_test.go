package egress

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/netip"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cordonhq/cordon/egress/policy"
	"github.com/cordonhq/cordon/internal/event"

	"github.com/cordonhq/cordon/internal/testutil"
)

// TestMain fails the package when goroutines outlive the tests: every proxy,
// server and client a test starts must be gone once it has been closed.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := settleGoroutines(10 * time.Second); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// settleGoroutines waits until no goroutine but the caller and the runtime's and test
// framework's own is left, or reports the stacks of those that are.
func settleGoroutines(wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		left := leftoverGoroutines()
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("goroutine leak: %d left over:\n\n%s", len(left), strings.Join(left, "\n\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// leftoverGoroutines returns the stacks of all goroutines except the caller's and those
// the standard library keeps for itself (signal handling, the fuzzing engine).
func leftoverGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var left []string
	for i, g := range strings.Split(string(buf), "\n\n") {
		if i == 0 || strings.Contains(g, "os/signal.signal_recv") || strings.Contains(g, "internal/fuzz.") ||
			strings.Contains(g, "testing.(*F).") || strings.Contains(g, "testing.runFuzzing") {
			continue
		}
		left = append(left, g)
	}
	return left
}

// recorder is an event.Sink that keeps what it receives.
type recorder struct {
	mu     sync.Mutex
	events []event.Event
	notify chan struct{}
	slow   atomic.Int64 // nanoseconds each Emit takes before it records, as a slow log's would
}

func newRecorder() *recorder { return &recorder{notify: make(chan struct{}, 1)} }

// Emit implements event.Sink.
func (r *recorder) Emit(e event.Event) {
	time.Sleep(time.Duration(r.slow.Load()))
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

// wait returns the events once there are at least n, failing the test after 10 seconds.
func (r *recorder) wait(t testing.TB, n int) []event.Event {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		r.mu.Lock()
		got := slices.Clone(r.events)
		r.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-r.notify:
		case <-deadline:
			t.Fatalf("got %d events, want %d: %+v", len(got), n, got)
		}
	}
}

// count is how many events of type typ were recorded so far; it does not wait.
func (r *recorder) count(typ event.Type) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// last waits for the n-th event and returns its type and body.
func (r *recorder) nth(t testing.TB, n int) (event.Type, event.NetBody) {
	t.Helper()
	evs := r.wait(t, n)
	e := evs[n-1]
	body, ok := e.Body.(event.NetBody)
	if !ok {
		t.Fatalf("event %d body is %T, want event.NetBody", n, e.Body)
	}
	return e.Type, body
}

// fakeResolver answers from a map and fails for other names, so no test ever looks up
// a real name.
type fakeResolver map[string][]netip.Addr

// LookupNetIP implements Resolver.
func (f fakeResolver) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	if network != "ip" {
		return nil, fmt.Errorf("unexpected network %q", network)
	}
	if addrs, ok := f[host]; ok {
		return addrs, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

// env is a proxy accepting on a loopback TCP listener, as in the sandbox (where the
// listener is made inside and handed over by process 1).
type env struct {
	proxy  *Proxy
	events *recorder
	addr   string // host:port of the proxy's listener

	mu     sync.Mutex
	dialed []netip.AddrPort
}

// dialedAny reports whether the proxy dialled any address of a.
func (e *env) dialedAddr(a netip.Addr) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.ContainsFunc(e.dialed, func(ap netip.AddrPort) bool { return ap.Addr() == a })
}

// startEnv starts a proxy for rules with resolver res and the given limits. It stops, and are checked to have stopped, when the test ends.
func startEnv(t testing.TB, rules []policy.Rule, res Resolver, cfg Config) *env {
	t.Helper()
	pol, err := policy.New(rules)
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	cfg.Policy, cfg.Resolver, cfg.Events = pol, res, rec
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{proxy: p, events: rec}
	real := p.dial
	p.dial = func(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
		e.mu.Lock()
		e.dialed = append(e.dialed, ap)
		e.mu.Unlock()
		return real(ctx, ap)
	}
	// As in the sandbox: the proxy accepts TCP on loopback itself.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.addr = ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	serveErr := make(chan error, 1)
	go func() { serveErr <- p.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		select {
		case err := <-serveErr:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Serve did not return after Close")
		}
	})
	return e
}

// cidrRule allows 127.0.0.0/8 on the ports of the given servers.
func cidrRule(ports ...uint16) policy.Rule {
	return policy.Rule{CIDR: netip.MustParsePrefix("127.0.0.0/8"), Ports: ports, Why: "test servers"}
}

// portOf returns the port of a server URL.
func portOf(t testing.TB, rawURL string) uint16 {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	return uint16(n)
}

// testHandler serves the test endpoints:
//
//	/hello            "hello\n"
//	/bytes?n=N&seed=S N pseudo-random bytes (the same for the same seed)
//	/sha256           the hex SHA-256 of the request body
//	/host             the Host header the server received
//	/headers          the request headers, one "Key: value" per line
func testHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello\n") })
	mux.HandleFunc("/bytes", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
		seed, _ := strconv.ParseUint(r.URL.Query().Get("seed"), 10, 64)
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		io.CopyN(w, testutil.RandReader(seed), n)
	})
	mux.HandleFunc("/sha256", func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "%d %s", n, hex.EncodeToString(h.Sum(nil)))
	})
	mux.HandleFunc("/host", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.Host) })
	mux.HandleFunc("/headers", func(w http.ResponseWriter, r *http.Request) {
		for k, vs := range r.Header {
			for _, v := range vs {
				fmt.Fprintf(w, "%s: %s\n", k, v)
			}
		}
	})
	return mux
}

// servers starts an HTTP and an HTTPS test server on 127.0.0.1.
func servers(t testing.TB) (plain, tlsSrv *httptest.Server) {
	t.Helper()
	plain = httptest.NewServer(testHandler())
	tlsSrv = httptest.NewUnstartedServer(testHandler())
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are expected
	tlsSrv.StartTLS()
	t.Cleanup(func() {
		plain.Close()
		tlsSrv.Close()
	})
	return plain, tlsSrv
}

// proxyClient returns an http.Client that uses the proxy and trusts
// the TLS test server's certificate for 127.0.0.1 and example.com.
func proxyClient(t testing.TB, e *env, tlsSrv *httptest.Server) *http.Client {
	t.Helper()
	tr := &http.Transport{
		Proxy:             http.ProxyURL(&url.URL{Scheme: "http", Host: e.addr}),
		ForceAttemptHTTP2: false,
	}
	if tlsSrv != nil {
		pool := x509.NewCertPool()
		pool.AddCert(tlsSrv.Certificate())
		tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 60 * time.Second}
}

// rawExchange writes req on a new connection to the proxy and returns the response and
// a reader positioned after its head.
func rawExchange(t testing.TB, e *env, req string) (*http.Response, net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading response to %q: %v", req, err)
	}
	return resp, c, br
}

// readBody returns the whole body.
func readBody(t testing.TB, r io.ReadCloser) string {
	t.Helper()
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// denyBody is the exact 403 body for a denial, with the suggested rule's line when one
// is given.
func denyBody(hostport, reason string, rule ...string) string {
	s := "cordon: egress to " + hostport + " denied by contract (" + reason + ")\n"
	for _, r := range rule {
		s += "cordon: to allow it, add to the contract: " + r + "\n"
	}
	return s
}

// socksConnect performs a SOCKS5 no-auth CONNECT over c with the given address bytes
// (ATYP and DST.ADDR) and port, and returns the reply code.
func socksConnect(t testing.TB, c net.Conn, cmd byte, addr []byte, port uint16) byte {
	t.Helper()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write([]byte{5, 1, 0}); err != nil {
		t.Fatal(err)
	}
	var sel [2]byte
	if _, err := io.ReadFull(c, sel[:]); err != nil {
		t.Fatalf("reading method selection: %v", err)
	}
	if sel != [2]byte{5, 0} {
		t.Fatalf("method selection %v, want [5 0]", sel)
	}
	req := append([]byte{5, cmd, 0}, addr...)
	req = append(req, byte(port>>8), byte(port))
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	var rep [10]byte
	if _, err := io.ReadFull(c, rep[:]); err != nil {
		t.Fatalf("reading socks reply: %v", err)
	}
	c.SetDeadline(time.Time{})
	return rep[1]
}

// exchange writes out on c and reads exactly n bytes back.
func exchange(t testing.TB, c net.Conn, out []byte, n int) []byte {
	t.Helper()
	if _, err := c.Write(out); err != nil {
		t.Fatal(err)
	}
	in := make([]byte, n)
	if _, err := io.ReadFull(c, in); err != nil {
		t.Fatalf("after %x: %v", out, err)
	}
	return in
}

// socksName encodes a domain name as SOCKS5 ATYP and DST.ADDR.
func socksName(name string) []byte { return append([]byte{3, byte(len(name))}, name...) }

// socksIPv4 encodes an IPv4 address as SOCKS5 ATYP and DST.ADDR.
func socksIPv4(s string) []byte {
	a := netip.MustParseAddr(s).As4()
	return append([]byte{1}, a[:]...)
}

// wantEvent checks the type and the named fields of an event body.
func wantEvent(t testing.TB, typ event.Type, got event.NetBody, wantTyp event.Type, want event.NetBody) {
	t.Helper()
	var errs []string
	if typ != wantTyp {
		errs = append(errs, fmt.Sprintf("type %s, want %s", typ, wantTyp))
	}
	check := func(name, g, w string) {
		if w != "" && g != w {
			errs = append(errs, fmt.Sprintf("%s %q, want %q", name, g, w))
		}
	}
	check("host", got.Host, want.Host)
	check("addr", got.Addr, want.Addr)
	check("proto", got.Proto, want.Proto)
	check("rule", got.Rule, want.Rule)
	if want.Port != 0 && got.Port != want.Port {
		errs = append(errs, fmt.Sprintf("port %d, want %d", got.Port, want.Port))
	}
	if want.Reason != "" && !strings.Contains(got.Reason, want.Reason) {
		errs = append(errs, fmt.Sprintf("reason %q, want it to contain %q", got.Reason, want.Reason))
	}
	if wantTyp == event.NetDeny && got.Reason == "" {
		errs = append(errs, "deny without a reason")
	}
	if wantTyp == event.NetAllow && (got.Reason != "" || got.Rule == "") {
		errs = append(errs, fmt.Sprintf("allow with reason %q and rule %q", got.Reason, got.Rule))
	}
	if want.BytesUp != 0 && got.BytesUp != want.BytesUp {
		errs = append(errs, fmt.Sprintf("bytes_up %d, want %d", got.BytesUp, want.BytesUp))
	}
	if want.BytesDown != 0 && got.BytesDown != want.BytesDown {
		errs = append(errs, fmt.Sprintf("bytes_down %d, want %d", got.BytesDown, want.BytesDown))
	}
	if got.DurationMS < 0 {
		errs = append(errs, "negative duration")
	}
	if len(errs) > 0 {
		t.Errorf("event %+v:\n\t%s", got, strings.Join(errs, "\n\t"))
	}
}

// httptraceConn returns ctx with a trace that records each connection the client uses.
func httptraceConn(ctx context.Context, conns *sync.Map) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { conns.Store(info.Conn.LocalAddr().String(), true) },
	})
}

// freePort returns a loopback port nothing listens on (nothing should dial it anyway).
func freePort(t testing.TB) uint16 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

// sha256Hex returns "N HEX": the length and SHA-256 of what r yields.
func sha256Hex(t testing.TB, r io.Reader) string {
	t.Helper()
	h := sha256.New()
	n, err := io.Copy(h, r)
	if err != nil {
		t.Errorf("reading: %v", err)
	}
	return strconv.FormatInt(n, 10) + " " + hex.EncodeToString(h.Sum(nil))
}

func bufioReader(c net.Conn) *bufio.Reader { return bufio.NewReader(c) }

// socksReplyName names a reply code in test failures.
func socksReplyName(code byte) string {
	switch code {
	case socksOK:
		return "succeeded"
	case socksGeneralFailure:
		return "general failure"
	case socksNotAllowed:
		return "connection not allowed by ruleset"
	case socksNetUnreachable:
		return "network unreachable"
	case socksHostUnreachable:
		return "host unreachable"
	case socksConnRefused:
		return "connection refused"
	case socksCmdUnsupported:
		return "command not supported"
	case socksAtypUnsupported:
		return "address type not supported"
	}
	return "reply " + strconv.Itoa(int(code))
}
