package integration

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/testutil"
)

// upstream is a real HTTP server on the host's loopback (127.0.0.2, which the sandbox's
// NO_PROXY does not cover), reachable from a sandbox only through the egress proxy.
type upstream struct {
	srv  *httptest.Server
	port string
	hits atomic.Int64
}

// payload is a deterministic stream of n bytes.
func payload(n int64) io.Reader {
	return io.LimitReader(&counter{}, n)
}

type counter struct{ i byte }

func (c *counter) Read(p []byte) (int, error) {
	for j := range p {
		p[j] = c.i * 7
		c.i++
	}
	return len(p), nil
}

func newUpstream(t *testing.T, tls bool, addr string) *upstream {
	t.Helper()
	u := &upstream{}
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		fmt.Fprint(w, "hello from upstream\n")
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		n, _ := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		io.Copy(w, payload(n))
	})
	mux.HandleFunc("/upload", func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		h := sha256.New()
		io.Copy(h, r.Body)
		fmt.Fprintln(w, hex.EncodeToString(h.Sum(nil)))
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening on %s: %v", addr, err)
	}
	u.srv = &httptest.Server{Listener: ln, Config: &http.Server{Handler: mux}}
	if tls {
		u.srv.StartTLS()
	} else {
		u.srv.Start()
	}
	t.Cleanup(u.srv.Close)
	_, u.port, _ = net.SplitHostPort(ln.Addr().String())
	return u
}

func (w *world) egressContract(ports ...string) {
	w.contract("version: 1\nnetwork:\n  allow:\n    - {cidr: 127.0.0.0/8, ports: [" + strings.Join(ports, ", ") + "], why: test servers}\n" +
		"    - {host: allowed.example.com, ports: [" + strings.Join(ports, ", ") + "]}\n")
}

func TestEgressAllowedThroughProxy(t *testing.T) {
	w := newWorld(t)
	up := newUpstream(t, false, "127.0.0.2:0")
	w.egressContract(up.port)
	r := w.sh("curl -sS --max-time 10 http://127.0.0.2:" + up.port + "/hello && wget -q -O - http://127.0.0.2:" + up.port + "/hello")
	if r.code != 0 || strings.Count(r.stdout, "hello from upstream") != 2 {
		t.Fatalf("allowed request through the proxy failed: %v", r)
	}
	// The audit log records the allowed connections, joined to the command.
	recs := lastRun(t, w)
	allowed := 0
	for _, rec := range recs {
		if rec.Type == "net.allow" {
			allowed++
			if rec.Cmd == "" {
				t.Errorf("net.allow without the command that made it: %s", rec.Body)
			}
			assertContains(t, "net.allow body", string(rec.Body), `"addr":"127.0.0.2:`+up.port+`"`)
		}
	}
	if allowed != 2 {
		t.Errorf("want 2 net.allow events, got %d", allowed)
	}
}

func TestEgressDenied(t *testing.T) {
	w := newWorld(t)
	up := newUpstream(t, false, "127.0.0.2:0")
	other := newUpstream(t, false, "127.0.0.2:0")
	w.egressContract(up.port)
	cases := []struct {
		name, script, want string
	}{
		{"other port", "curl -sS http://127.0.0.2:" + other.port + "/hello",
			"cordon: egress to 127.0.0.2:" + other.port + " denied by contract"},
		{"name not on the allowlist", "curl -sS http://allowed.example.com.evil.example/",
			"denied by contract"},
		{"userinfo trick", "printf 'GET http://127.0.0.2:" + up.port + "@evil.example/ HTTP/1.1\\r\\nHost: 127.0.0.2:" + up.port + "@evil.example\\r\\n\\r\\n' | curl -sS telnet://127.0.0.1:3128 --max-time 3",
			"HTTP/1.1 40"},
		{"hex IPv4 form", "printf 'GET http://0x7f.2:" + up.port + "/hello HTTP/1.1\\r\\nHost: 0x7f.2:" + up.port + "\\r\\n\\r\\n' | curl -sS telnet://127.0.0.1:3128 --max-time 3",
			"HTTP/1.1 403"},
		{"decimal IPv4 form", "printf 'GET http://2130706434:" + up.port + "/hello HTTP/1.1\\r\\nHost: 2130706434:" + up.port + "\\r\\n\\r\\n' | curl -sS telnet://127.0.0.1:3128 --max-time 3",
			"HTTP/1.1 403"},
		{"Host header differs from target", "printf 'GET http://127.0.0.2:" + up.port + "/hello HTTP/1.1\\r\\nHost: evil.example\\r\\n\\r\\n' | curl -sS telnet://127.0.0.1:3128 --max-time 3",
			"HTTP/1.1 403"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := w.sh(c.script)
			assertContains(t, "output", r.stdout+r.stderr, c.want)
			if strings.Contains(r.stdout, "hello from upstream") {
				t.Errorf("the request reached the upstream: %v", r)
			}
		})
	}
	if n := other.hits.Load() + up.hits.Load(); n != 0 {
		t.Errorf("upstreams got %d requests; every case must be denied before dialling", n)
	}
	// A host rule alone never reaches a special address, whatever the name resolves to.
	w.contract("version: 1\nnetwork:\n  allow: [{host: localhost, ports: [" + up.port + "]}]\n")
	r := w.sh("curl -sS --noproxy '' http://localhost:" + up.port + "/hello")
	assertContains(t, "host rule resolving to loopback", r.stdout, "cordon: egress to localhost:"+up.port+" denied by contract (address 127.0.0.1")
	w.egressContract(up.port)
	r = w.sh("curl -sS -o /dev/null -w '%{http_code}' http://127.0.0.2:" + other.port + "/hello")
	if r.stdout != "403" {
		t.Errorf("denied request: want HTTP 403, got %q", r.stdout)
	}
	denies := 0
	for _, rec := range lastRun(t, w) {
		if rec.Type == "net.deny" {
			denies++
			assertContains(t, "net.deny body", string(rec.Body), `"reason":`)
		}
	}
	if denies == 0 {
		t.Error("no net.deny event in the audit log")
	}
}

func TestEgressBypassHasNoRoute(t *testing.T) {
	w := newWorld(t)
	up := newUpstream(t, false, "127.0.0.2:0")
	w.egressContract(up.port)
	r := w.sh("curl -sS --max-time 5 --noproxy '*' http://127.0.0.2:" + up.port + "/hello; echo curl=$?; " +
		"bash -c 'echo x > /dev/tcp/127.0.0.2/" + up.port + "' ; echo tcp=$?; " +
		"ns=$(awk '/^nameserver/{print $2; exit}' /etc/resolv.conf); case \"$ns\" in ''|127.*|::1) ns=192.0.2.53;; esac; " +
		"bash -c \"echo x > /dev/udp/$ns/53\"; echo udp=$?")
	assertContains(t, "stdout", r.stdout, "curl=7")
	assertContains(t, "stdout", r.stdout, "tcp=1")
	assertContains(t, "stdout", r.stdout, "udp=1")
	assertContains(t, "stderr", r.stderr, "Connection refused") // its own loopback, nothing listening
	if up.hits.Load() != 0 {
		t.Fatal("a direct connection reached the host's server")
	}
}

func TestEgressTLSAndSNI(t *testing.T) {
	w := newWorld(t)
	up := newUpstream(t, true, "127.0.0.2:443")
	w.egressContract(up.port)
	r := w.sh("curl -sS -k --max-time 10 https://127.0.0.2/hello")
	if r.code != 0 || !strings.Contains(r.stdout, "hello from upstream") {
		t.Fatalf("HTTPS through CONNECT failed: %v", r)
	}
	_, err := exec.LookPath("openssl")
	testutil.Require(t, err == nil, "openssl is needed to send a mismatched SNI")
	// Tunnel to an allowed address while naming another host in the ClientHello.
	r = w.sh("echo | openssl s_client -proxy 127.0.0.1:3128 -connect 127.0.0.2:443 -servername evil.example 2>&1; echo rc=$?")
	if strings.Contains(r.stdout, "BEGIN CERTIFICATE") || strings.Contains(r.stdout, "Server certificate") {
		t.Fatalf("a TLS session was set up despite the SNI mismatch: %v", r)
	}
	// The client is told: a TLS access_denied alert, and cordon's summary line.
	assertContains(t, "openssl", r.stdout, "alert access denied")
	assertContains(t, "run stderr", r.stderr, "cordon: egress denied: 127.0.0.2:443 (tls server name does not match the host)\n")
	hits := up.hits.Load()
	if hits != 1 {
		t.Errorf("upstream hits %d; want only the allowed request", hits)
	}
	found := false
	for _, rec := range lastRun(t, w) {
		if rec.Type == "net.deny" && strings.Contains(string(rec.Body), "evil.example") {
			found = true
		}
	}
	if !found {
		t.Error("no net.deny event naming the SNI host")
	}
}

func TestEgressLargeTransfersAndConcurrency(t *testing.T) {
	w := newWorld(t)
	up := newUpstream(t, false, "127.0.0.2:0")
	w.egressContract(up.port)
	const n = 64 << 20
	h := sha256.New()
	io.Copy(h, payload(n))
	want := hex.EncodeToString(h.Sum(nil))
	base := "http://127.0.0.2:" + up.port
	r := w.sh("curl -sS " + base + "/big?n=" + strconv.Itoa(n) + " | sha256sum; " +
		"head -c 33554432 /dev/urandom > up.bin && sha256sum up.bin | cut -d' ' -f1 && curl -sS -T up.bin " + base + "/upload; " +
		"ok=0; for i in $(seq 60); do curl -sS --max-time 20 " + base + "/hello > r.$i & done; wait; " +
		"cat r.* | grep -c 'hello from upstream'")
	if r.code != 0 {
		t.Fatalf("transfers failed: %v", r)
	}
	lines := strings.Fields(r.stdout)
	if len(lines) < 5 || lines[0] != want {
		t.Fatalf("64 MB download corrupted: got %q want %s", lines, want)
	}
	if lines[2] != lines[3] {
		t.Errorf("32 MB upload corrupted: sent %s, server got %s", lines[2], lines[3])
	}
	if lines[4] != "60" {
		t.Errorf("concurrent requests: %s of 60 succeeded", lines[4])
	}
	// Nothing of the run is left: no run directory (so no socket), no bridge process.
	entries, _ := os.ReadDir(w.runRoot)
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(w.runRoot, e.Name(), "owner.json")); err == nil {
			data, _ := os.ReadFile(filepath.Join(w.runRoot, e.Name(), "owner.json"))
			if strings.Contains(string(data), w.ws) {
				t.Errorf("run directory %s left behind", e.Name())
			}
		}
	}
	if p := processesWithCwd(w.ws); len(p) > 0 {
		t.Errorf("processes of the run (pid1) left: %v", p)
	}
}

// lastRun reads the events of the world's newest run.
func lastRun(t *testing.T, w *world) []audit.Record {
	t.Helper()
	root := filepath.Join(w.home, ".local", "state", "cordon", "runs")
	runs, err := audit.List(root)
	if err != nil || len(runs) == 0 {
		t.Fatalf("no runs in %s: %v", root, err)
	}
	recs, err := audit.ReadEvents(filepath.Join(root, runs[0].ID, audit.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func TestEgressSOCKS5(t *testing.T) {
	w := newWorld(t)
	up := newUpstream(t, false, "127.0.0.2:0")
	other := newUpstream(t, false, "127.0.0.2:0")
	w.egressContract(up.port)
	// ALL_PROXY is socks5h://127.0.0.1:3128: what git over ssh (ProxyCommand) and
	// other non-HTTP clients use. Names are resolved by the proxy (socks5h).
	r := w.sh("curl -sS --max-time 10 -x \"$ALL_PROXY\" http://127.0.0.2:" + up.port + "/hello; " +
		"curl -sS --max-time 10 -x \"$ALL_PROXY\" http://127.0.0.2:" + other.port + "/hello; echo denied=$?")
	assertContains(t, "stdout", r.stdout, "hello from upstream")
	assertContains(t, "stdout", r.stdout, "denied=97") // curl: proxy handshake error
	// Reply code 2: "connection not allowed by ruleset".
	assertContains(t, "stderr", r.stderr, "Can't complete SOCKS5 connection to 127.0.0.2. (2)")
	if other.hits.Load() != 0 {
		t.Error("the denied SOCKS5 request reached its upstream")
	}
}

func TestHostLoopbackUnreachable(t *testing.T) {
	w := newWorld(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- struct{}{}
			c.Close()
		}
	}()
	addr := ln.Addr().(*net.TCPAddr)
	r := w.sh("curl -sS --max-time 5 http://" + addr.String() + "/; echo curl=$?; " +
		"curl -sS --max-time 5 --noproxy '*' http://" + addr.String() + "/; " +
		"cat /proc/net/dev | tail -n +3 | cut -d: -f1")
	assertContains(t, "stdout", r.stdout, "curl=7")
	assertContains(t, "stderr", r.stderr, "Failed to connect to 127.0.0.1")
	if ifs := strings.Fields(r.stdout[strings.Index(r.stdout, "curl=7")+len("curl=7"):]); len(ifs) != 1 || ifs[0] != "lo" {
		t.Errorf("interfaces inside: got %q; want only lo", ifs)
	}
	select {
	case <-accepted:
		t.Fatal("the host's loopback server received a connection from the sandbox")
	case <-time.After(100 * time.Millisecond):
	}
}
