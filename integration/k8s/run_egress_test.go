//go:build k8s

package k8s

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/event"
)

// clusterTargets are what issue 37 names a Pod's command must not reach: the API
// server (its address on the node, and its Service's ClusterIP), the kubelet (on the
// node's address, and its health port on the node's loopback), the cloud metadata
// address. Another tenant's Pod is added by the test. answers says the address
// serves on this test cluster; the test checks it does from this host first, so that
// a command's failure to reach it is the contract's, not a dead address. The metadata
// address has no server here and the ClusterIP no Service proxy: for those, the
// proxy's denial in the log is what shows the contract refused them before any dial.
var clusterTargets = []struct {
	name, addr string
	answers    bool
}{
	{"API server", apiServer, true},
	{"API server Service", "198.18.2.1:443", false},
	{"kubelet", nodeKubelet, true},
	{"kubelet health on the node's loopback", "127.0.0.1:10248", true},
	{"cloud metadata", "169.254.169.254:80", false},
}

// A run's command, through the real `cordon run --backend kubernetes` (its proxy on
// this host, relayed into the Pod), reaches none of clusterTargets nor another
// tenant's Pod: not through the proxy however it asks (HTTP, CONNECT, SOCKS5), not
// without it (the commands' network namespace holds loopback only). The run's log
// names each denial, for each way of asking; the one server the contract allows
// answers through the same proxy in the same run, so the denials are the policy's.
// TestPodEgress covers the same targets at the placement level, with a proxy of the
// test's own.
func TestRunEgressToTheCluster(t *testing.T) {
	cs, _ := clientConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	targets := clusterTargets
	targets = append(targets, struct {
		name, addr string
		answers    bool
	}{"another tenant's Pod", otherPodIP(ctx, t, cs) + ":8080", true})
	for _, tg := range targets {
		if !tg.answers {
			continue
		}
		c, err := net.DialTimeout("tcp", tg.addr, 5*time.Second)
		if err != nil {
			t.Fatalf("%s (%s) does not answer this host, the test would prove nothing: %v", tg.name, tg.addr, err)
		}
		c.Close()
	}

	ns, node := namespaceWith(ctx, t, cs, restricted)
	image := podImage(t)
	allowed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "allowed answer\n") }))
	defer allowed.Close()
	ap := netip.MustParseAddrPort(strings.TrimPrefix(allowed.URL, "http://"))
	ws := t.TempDir()
	data := fmt.Sprintf("version: 1\nimage: %s\nfilesystem:\n  writable: [\".\"]\nnetwork:\n  allow:\n    - cidr: 127.0.0.1/32\n      ports: [%d]\n      why: the test's server\nlimits: {memory: 256MiB, pids: 128, cpu: 0.1}\n", image, ap.Port())
	if err := os.WriteFile(filepath.Join(ws, "cordon.yaml"), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	env := backendEnv(t, ns, node, image, "tenant-a")

	// One run, every target every way; each line says how an attempt ended.
	var script strings.Builder
	script.WriteString(`try() { out=$("$@" 2>&1); echo "$? $(echo "$out" | tr '\n' ' ' | cut -c1-160)"; }
`)
	// --noproxy '': through the proxy even to a loopback address (the run's NO_PROXY
	// names loopback, which is the Pod's own, not this host's).
	fmt.Fprintf(&script, "echo \"allowed: $(curl -sS --noproxy '' --max-time 20 %s/)\"\n", allowed.URL)
	for i, tg := range targets {
		fmt.Fprintf(&script, `echo "%[1]d http: $(try curl -sS --noproxy '' --max-time 20 -o /dev/null -w '%%{http_code}' http://%[2]s/)"
echo "%[1]d connect: $(try curl -sS --noproxy '' --max-time 20 -p -o /dev/null http://%[2]s/)"
echo "%[1]d socks5: $(try curl -sS --noproxy '' --max-time 20 -x "$ALL_PROXY" -o /dev/null http://%[2]s/)"
echo "%[1]d direct: $(try curl -sS --noproxy '*' --max-time 5 -o /dev/null http://%[2]s/)"
`, i, tg.addr)
	}
	code, stdout, stderr := cordonIn(ctx, t, env, ws, "run", "--backend", "kubernetes", "--", "/bin/sh", "-c", script.String())
	t.Logf("the run (status %d):\n%s%s", code, stdout, stderr)
	if !strings.Contains(stdout, "allowed: allowed answer\n") {
		t.Fatalf("the allowed server did not answer through the proxy: status %d\n%s%s", code, stdout, stderr)
	}
	lines := map[string]string{}
	for _, l := range strings.Split(stdout, "\n") {
		if k, v, ok := strings.Cut(l, ": "); ok {
			lines[k] = v
		}
	}
	for i, tg := range targets {
		for _, way := range []string{"http", "connect", "socks5", "direct"} {
			got := strings.TrimSpace(lines[fmt.Sprintf("%d %s", i, way)])
			// curl's exit status first: 0 is a connection made. Through the proxy,
			// HTTP gets the proxy's 403 (curl exits 0 with it: the status is the
			// answer), CONNECT a failed tunnel (56), SOCKS5 a refused handshake (97).
			held := got != "" && !strings.HasPrefix(got, "0 ")
			if way == "http" {
				held = got == "0 403"
			}
			if !held {
				t.Errorf("%s (%s), %s: %q; want it refused", tg.name, tg.addr, way, got)
			}
		}
	}

	// The log names every denial through the proxy, target by target, way by way.
	auditDir := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "CORDON_AUDIT_DIR="); ok {
			auditDir = v
		}
	}
	runs, err := audit.List(auditDir)
	if err != nil || len(runs) != 1 {
		t.Fatalf("the run's log under %s: %d runs, %v", auditDir, len(runs), err)
	}
	recs, err := audit.ReadEvents(filepath.Join(auditDir, runs[0].ID, audit.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	denied := map[string]bool{}
	for _, rec := range recs {
		if rec.Type != event.NetDeny {
			continue
		}
		var b event.NetBody
		if err := rec.DecodeBody(&b); err != nil {
			t.Fatal(err)
		}
		if b.Addr != "" {
			t.Errorf("a denial that dialled %s: %+v", b.Addr, b)
		}
		denied[b.Proto+" "+net.JoinHostPort(b.Host, fmt.Sprint(b.Port))] = true
	}
	for _, tg := range targets {
		for _, proto := range []string{"http", "connect", "socks5"} {
			if !denied[proto+" "+tg.addr] {
				t.Errorf("%s (%s): no %s denial in the run's log (denials: %v)", tg.name, tg.addr, proto, denied)
			}
		}
	}
}
