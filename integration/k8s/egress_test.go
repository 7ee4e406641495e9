//go:build k8s

package k8s

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cordonhq/cordon/egress"
	"github.com/cordonhq/cordon/egress/policy"
	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/placement/kubernetes/podspec"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// apiServer is the test cluster's API server (scripts/k8s-env.sh).
const apiServer = "127.0.0.1:16443"

// bigSize is the large transfer's size.
const bigSize = 32 << 20

// origin is the one server the Pod's contract allows, on the host's loopback: a
// greeting, a large body, a barrier that answers once a dozen requests wait at it, and
// an endless body that records how far its writes got.
type origin struct {
	srv     *httptest.Server
	big     []byte
	waiting atomic.Int32
	all     chan struct{} // closed when a dozen requests wait at the barrier
	once    sync.Once

	endless     atomic.Int64 // bytes of /endless written so far
	endlessAt   atomic.Int64 // when the last write of /endless returned (unix ns)
	endlessDone chan struct{}
}

func newOrigin(t *testing.T) *origin {
	o := &origin{big: make([]byte, bigSize), all: make(chan struct{}), endlessDone: make(chan struct{})}
	r := rand.NewChaCha8([32]byte{37})
	r.Read(o.big)
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello from the host\n") })
	mux.HandleFunc("/big", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(o.big)))
		w.Write(o.big)
	})
	mux.HandleFunc("/barrier/", func(w http.ResponseWriter, req *http.Request) {
		if o.waiting.Add(1) == 12 {
			o.once.Do(func() { close(o.all) })
		}
		select {
		case <-o.all:
			fmt.Fprintf(w, "together %s\n", strings.TrimPrefix(req.URL.Path, "/barrier/"))
		case <-time.After(60 * time.Second):
			http.Error(w, "alone", http.StatusGatewayTimeout)
		}
	})
	mux.HandleFunc("/endless", func(w http.ResponseWriter, req *http.Request) {
		defer close(o.endlessDone)
		chunk := make([]byte, 64<<10)
		for o.endless.Load() < 1<<30 {
			n, err := w.Write(chunk)
			o.endless.Add(int64(n))
			o.endlessAt.Store(time.Now().UnixNano())
			if err != nil {
				return
			}
		}
	})
	o.srv = httptest.NewServer(mux)
	t.Cleanup(o.srv.Close)
	return o
}

func (o *origin) addr() string { return o.srv.Listener.Addr().String() }

// denials collects the proxy's deny events.
type denials struct {
	mu   sync.Mutex
	seen []event.NetBody
}

func (d *denials) Emit(e event.Event) {
	if b, ok := e.Body.(event.NetBody); ok && e.Type == event.NetDeny {
		d.mu.Lock()
		d.seen = append(d.seen, b)
		d.mu.Unlock()
	}
}

func (d *denials) of(host string, port uint16) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, b := range d.seen {
		if b.Host == host && b.Port == port {
			return true
		}
	}
	return false
}

// A command in the Pod has one way out: cordon's egress proxy, on the host, reached
// through 127.0.0.1:3128 in the commands' network namespace and relayed over the
// control channel's exec stream. The contract's allowlist decides there: the one
// allowed server on the host's loopback answers through the proxy (HTTP and CONNECT),
// a large body arrives intact, a dozen connections run at once; the API server, the
// node's kubelet, another tenant's Pod and a loopback port not allowed are denied by
// the proxy (and the proxy says so in its events); nothing is reached without the
// proxy, and no command can listen on the proxy address in its place. A connection
// whose command never reads stalls alone: an exec still runs.
func TestPodEgress(t *testing.T) {
	cs, rc := clientConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	other := otherPodIP(ctx, t, cs)
	ns, plan, cfg := sessionSetup(ctx, t, cs)
	p, s := startPlaced(ctx, t, cs, plan, cfg)

	o := newOrigin(t)
	refused := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "reached\n") }))
	defer refused.Close()
	allowed := netip.MustParseAddrPort(o.addr())
	pol, err := policy.New([]policy.Rule{{CIDR: netip.PrefixFrom(allowed.Addr(), 32), Ports: []uint16{allowed.Port()}, Why: "the test's server"}})
	if err != nil {
		t.Fatal(err)
	}
	denied := &denials{}
	proxy, err := egress.New(egress.Config{Policy: pol, Events: denied})
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()

	spec := podspec.InitSpec(plan, cfg, append(podEnv, "http_proxy=http://"+sandbox.ProxyAddr))
	spec.Egress = sandbox.ProxyAddr
	ch, err := p.Attach(ctx, rc, s, spec)
	if err != nil {
		t.Fatalf("attaching: %v%s", err, describe(ctx, cs, ns, podspec.Name(s.ID)))
	}
	defer ch.Close()
	if ch.Egress == nil {
		t.Fatal("the channel has no egress listener")
	}
	go proxy.Serve(ctx, ch.Egress)
	r := &runner{t: t, ch: ch, dir: plan.Workspace}

	// Allowed: HTTP through the proxy, and CONNECT.
	code, stdout, stderr := r.run("", "/bin/sh", "-c", "wget -q -O - http://"+o.addr()+"/hello")
	if code != 0 || stdout != "hello from the host\n" {
		t.Errorf("HTTP through the proxy: status %d, %q, %q", code, stdout, stderr)
	}
	connect := func(target, path string) string {
		return fmt.Sprintf(`{ printf 'CONNECT %[1]s HTTP/1.1\r\nHost: %[1]s\r\n\r\n'; sleep 1; printf 'GET %[2]s HTTP/1.0\r\nHost: %[1]s\r\n\r\n'; sleep 5; } | nc -w 10 127.0.0.1 3128`, target, path)
	}
	code, stdout, stderr = r.run("", "/bin/sh", "-c", connect(o.addr(), "/hello"))
	if !strings.HasPrefix(stdout, "HTTP/1.1 200") || !strings.HasSuffix(stdout, "\r\n\r\nhello from the host\n") {
		t.Errorf("CONNECT through the proxy: status %d, %q, %q", code, stdout, stderr)
	}

	// Denied by the proxy, each way of asking; and nothing without it.
	for _, d := range []string{apiServer, nodeKubelet, other + ":8080", refused.Listener.Addr().String()} {
		ap := netip.MustParseAddrPort(d)
		script := fmt.Sprintf(`wget -q -O - http://%[1]s/ 2>&1; echo "http=$?"
%[2]s
nc -w 3 %[3]s %[4]d </dev/null 2>&1 && echo direct=connected || echo direct=failed
`, d, connect(d, "/"), ap.Addr(), ap.Port())
		_, stdout, _ := r.run("", "/bin/sh", "-c", script)
		t.Logf("%s:\n%s", d, stdout)
		if !strings.Contains(stdout, "403 Forbidden") || !strings.Contains(stdout, "http=1") ||
			!strings.Contains(stdout, "HTTP/1.1 403") || !strings.Contains(stdout, "direct=failed") || strings.Contains(stdout, "reached") {
			t.Errorf("%s: want the proxy's 403 for HTTP and CONNECT, and no direct connection, in\n%s", d, stdout)
		}
		if !denied.of(ap.Addr().String(), ap.Port()) {
			t.Errorf("%s: the proxy recorded no denial", d)
		}
	}
	_, stdout, _ = r.run("", "/bin/sh", "-c", fmt.Sprintf("nc -w 3 %s %d </dev/null && echo direct=connected || echo direct=failed", allowed.Addr(), allowed.Port()))
	if !strings.Contains(stdout, "direct=failed") {
		t.Errorf("the allowed server without the proxy: %q, want no connection", stdout)
	}

	// The proxy address is taken: no command can listen there in its place. And
	// cordon's measure of the sandbox passes whole, loopback only included.
	_, stdout, stderr = r.run("", "/bin/sh", "-c", "nc -l -p 3128 </dev/null; echo listen=$?")
	if !strings.Contains(stdout, "listen=1") || !strings.Contains(stderr, "in use") {
		t.Errorf("a command listening on the proxy address: %q, %q; want it refused (address in use)", stdout, stderr)
	}
	r.posture(spec.Writable)

	// A large body, intact.
	code, stdout, stderr = r.run("", "/bin/sh", "-c", "wget -q -O - http://"+o.addr()+"/big | sha256sum")
	want := sha256.Sum256(o.big)
	if code != 0 || !strings.HasPrefix(stdout, hex.EncodeToString(want[:])) {
		t.Errorf("%d MiB through the proxy: status %d, %q (%s), want %x", bigSize>>20, code, stdout, stderr, want)
	}

	// A dozen connections at once: the server answers none until all wait.
	script := `for i in $(seq 12); do wget -q -O /tmp/c$i http://` + o.addr() + `/barrier/$i & done; wait; cat /tmp/c*`
	code, stdout, stderr = r.run("", "/bin/sh", "-c", script)
	for i := 1; i <= 12; i++ {
		if !strings.Contains(stdout, fmt.Sprintf("together %d\n", i)) {
			t.Errorf("a dozen connections: status %d, connection %d missing from %q (%s)", code, i, stdout, stderr)
		}
	}

	// A command that never reads: its connection's window and buffers fill, the
	// server's writes stop; an exec and another connection still go through.
	r.send("", "/bin/sh", "-c", fmt.Sprintf(`{ printf 'GET http://%[1]s/endless HTTP/1.0\r\nHost: %[1]s\r\n\r\n'; sleep 600; } | nc 127.0.0.1 3128 | sleep 600`, o.addr()))
	deadline := time.Now().Add(time.Minute)
	for {
		at := o.endlessAt.Load()
		if o.endless.Load() > 1<<20 && at != 0 && time.Since(time.Unix(0, at)) > 2*time.Second {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the unread connection never stalled: %d bytes written", o.endless.Load())
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the unread connection stalled after %d bytes", o.endless.Load())
	if code, _, stderr := r.run("", "/bin/true"); code != 0 {
		t.Errorf("an exec while a connection is stalled: status %d (%s)", code, stderr)
	}
	if code, stdout, _ := r.run("", "/bin/sh", "-c", "wget -q -O - http://"+o.addr()+"/hello"); code != 0 || stdout != "hello from the host\n" {
		t.Errorf("another connection while one is stalled: status %d, %q", code, stdout)
	}
	select {
	case <-o.endlessDone:
		t.Errorf("the unread connection was not stalled: %d bytes went to a command that reads none", o.endless.Load())
	default:
	}
}
