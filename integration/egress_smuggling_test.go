package integration

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// redFlood opens ARGV[0] connections to the proxy and holds them silent, plus one that
// stops halfway through a request head. A probe request after them is answered (503)
// or closed only once the proxy has accepted and placed every one before it (accept
// takes the backlog in order); then it closes the silent ones. The half-open one is
// left to the end of the run.
const redFlood = `use IO::Socket::INET;
my ($n, $target) = @ARGV;
sub dial { IO::Socket::INET->new(PeerAddr => "127.0.0.1", PeerPort => 3128, Proto => "tcp") }
my $half = dial() or die "connect: $!";
$half->autoflush(1);
print $half "GET http://$target/ HTTP/1.1\r\nHost: 127.0.";
my @c;
for (1..$n) { my $s = dial() or last; push @c, $s; }
print "opened " . scalar(@c) . "\n";
my $probe = dial() or die "probe: $!";
print $probe "GET http://$target/hello HTTP/1.1\r\nHost: $target\r\n\r\n";
alarm 60;
my $status = <$probe> // "closed\n";
print "probe: $status";
close $_ for @c;
if (fork() == 0) { sleep 600; exit 0; } # keeps $half open past the command's end
`

// TestRedEgressFloodAndHalfOpen: far more connections than MaxConns (256 served, 256
// answered, the rest closed), held silent, and one request head left half-written at
// the command's end: the proxy serves again once they are gone, each one over the limit
// is recorded as a deny, and the run ends.
func TestRedEgressFloodAndHalfOpen(t *testing.T) {
	t.Run("bwrap", testRedEgressFlood)
	forEachContainerBackend(t, func(t *testing.T, _ string) { testRedEgressFlood(t) })
}

func testRedEgressFlood(t *testing.T) {
	w := newWorld(t)
	up := newUpstream(t, false, "127.0.0.2:0")
	w.egressContract(up.port)
	mustWrite(t, filepath.Join(w.ws, "flood.pl"), redFlood)
	// Once the flood is closed a slot frees as soon as the proxy reads its EOF; until
	// then a request is answered 503. The loop waits for that, with a deadline.
	script := `ulimit -n 4096 2>/dev/null; perl flood.pl 800 127.0.0.2:` + up.port + `
for i in $(seq 100); do curl -sS --max-time 10 -f http://127.0.0.2:` + up.port + `/hello 2>/dev/null && exit 0; sleep 0.1; done; exit 7`
	r := w.sh(script)
	if r.code != 0 || !strings.Contains(r.stdout, "opened 800") || !strings.Contains(r.stdout, "hello from upstream") {
		t.Fatalf("want 800 connections opened and the proxy serving again after them: %v", r)
	}
	denied := 0
	for _, rec := range lastRun(t, w) {
		if rec.Type == "net.deny" && strings.Contains(string(rec.Body), "too many connections") {
			denied++
		}
	}
	// 802 connections (the half-open one, 800 silent, the probe) against 256 slots held
	// until the probe is answered: 546 over the limit, each recorded.
	if denied != 802-256 {
		t.Errorf("%d connections over the limit recorded as denied; want %d: %v", denied, 802-256, r)
	}
	if strings.Contains(r.stdout, "probe: HTTP/1.1 200") {
		t.Errorf("the probe was served past the limit: %v", r)
	}
}

// TestRedEgressSmuggling drives the proxy through the handed-over listener with raw
// requests: a kept-alive second request to a denied address, a CL+TE body hiding a
// request to it, two Content-Lengths, and a Host header that names it. The denied
// upstream is never reached, and each refusal is recorded.
func TestRedEgressSmuggling(t *testing.T) {
	t.Run("bwrap", testRedEgressSmuggling)
	forEachContainerBackend(t, func(t *testing.T, _ string) { testRedEgressSmuggling(t) })
}

func testRedEgressSmuggling(t *testing.T) {
	w := newWorld(t)
	up := newUpstream(t, false, "127.0.0.2:0")
	var deniedHits atomic.Int64
	dl, err := net.Listen("tcp4", "127.0.0.3:"+up.port)
	if err != nil {
		t.Fatalf("the denied upstream on 127.0.0.3:%s: %v", up.port, err)
	}
	defer dl.Close()
	go func() {
		for {
			c, err := dl.Accept()
			if err != nil {
				return
			}
			deniedHits.Add(1)
			c.Close()
		}
	}()
	w.contract("version: 1\nnetwork:\n  allow:\n    - {cidr: 127.0.0.2/32, ports: [" + up.port + "], why: test server}\n")
	mustWrite(t, filepath.Join(w.ws, "raw.pl"), redRaw)
	ok, bad := "127.0.0.2:"+up.port, "127.0.0.3:"+up.port
	cases := []struct{ name, req string }{
		{"keep-alive", "GET http://" + ok + "/hello HTTP/1.1\nHost: " + ok + "\n\nGET http://" + bad + "/hello HTTP/1.1\nHost: " + bad + "\n\n"},
		{"CL+TE", "POST http://" + ok + "/upload HTTP/1.1\nHost: " + ok + "\nContent-Length: 60\nTransfer-Encoding: chunked\n\n0\n\nGET http://" + bad + "/hello HTTP/1.1\nHost: " + bad + "\n\n"},
		{"two CLs", "POST http://" + ok + "/upload HTTP/1.1\nHost: " + ok + "\nContent-Length: 0\nContent-Length: 60\n\nGET http://" + bad + "/hello HTTP/1.1\nHost: " + bad + "\n\n"},
		{"Host names another", "GET http://" + ok + "/hello HTTP/1.1\nHost: " + bad + "\n\n"},
		{"CONNECT after an allowed one", "GET http://" + ok + "/hello HTTP/1.1\nHost: " + ok + "\n\nCONNECT " + bad + " HTTP/1.1\nHost: " + bad + "\n\n"},
		{"origin-form after an allowed one", "GET http://" + ok + "/hello HTTP/1.1\nHost: " + ok + "\n\nGET /hello HTTP/1.1\nHost: " + bad + "\n\n"},
	}
	var script strings.Builder
	for i, c := range cases {
		mustWrite(t, filepath.Join(w.ws, fmt.Sprintf("req%d", i)), c.req)
		fmt.Fprintf(&script, "echo '== %s'; perl raw.pl < req%d\n", c.name, i)
	}
	r := w.sh(script.String())
	if r.code != 0 {
		t.Fatalf("raw requests: %v", r)
	}
	if n := deniedHits.Load(); n != 0 {
		t.Errorf("the denied upstream %s was reached %d times: %v", bad, n, r)
	}
	for _, c := range cases {
		i := strings.Index(r.stdout, "== "+c.name+"\n")
		if i < 0 {
			t.Errorf("%s: no output: %v", c.name, r)
			continue
		}
		out := r.stdout[i:]
		if j := strings.Index(out[3:], "== "); j >= 0 {
			out = out[:j+3]
		}
		// Each attempt ends refused (4xx, or 502 for a denied address) or with the
		// connection closed before the smuggled part is served.
		if strings.Count(out, "< HTTP/1.1 200") > 1 {
			t.Errorf("%s: more than one request served: %s", c.name, out)
		}
	}
	deny := 0
	for _, rec := range lastRun(t, w) {
		if rec.Type == "net.allow" && strings.Contains(string(rec.Body), bad) {
			t.Errorf("a connection to the denied %s recorded as allowed: %s", bad, rec.Body)
		}
		if rec.Type == "net.deny" {
			deny++
		}
	}
	if deny < len(cases)-1 {
		t.Errorf("%d denies recorded; want one per refused attempt (at least %d): %v", deny, len(cases)-1, r)
	}
}

// redTunnel opens a CONNECT tunnel to ARGV[0] through the proxy, says so, and reads
// from it until it ends.
const redTunnel = `use IO::Socket::INET;
$| = 1;
my $t = shift;
my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1", PeerPort => 3128, Proto => "tcp") or die "connect: $!";
print $s "CONNECT $t HTTP/1.1\r\nHost: $t\r\n\r\n";
my $status = <$s>;
die "CONNECT: $status" unless $status =~ / 200 /;
while (<$s>) { last if /^\r?\n$/; }
my $buf;
sysread($s, $buf, 1) or die "no bytes through the tunnel";
print "tunnel up\n";
while (sysread($s, $buf, 65536)) {}
print "tunnel ended\n";
`

// streamer is a TCP server that writes to each connection until it fails, and counts
// the connections still open.
type streamer struct {
	ln   net.Listener
	open atomic.Int64
	port string
}

func newStreamer(t *testing.T, addr string) *streamer {
	t.Helper()
	ln, err := net.Listen("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	s := &streamer{ln: ln}
	_, s.port, _ = net.SplitHostPort(ln.Addr().String())
	t.Cleanup(func() { ln.Close() })
	go func() {
		buf := make([]byte, 4096)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.open.Add(1)
			go func() {
				defer s.open.Add(-1)
				defer c.Close()
				for {
					if _, err := c.Write(buf); err != nil {
						return
					}
				}
			}()
		}
	}()
	return s
}

// TestRedEgressSessionStopWhileTunnelsBusy: in a session on every backend, a tunnel left running
// in the background by one exec and kept busy across many later execs, and a second one
// in the foreground of an exec still running, are both cut by session stop: stop
// succeeds, the foreground exec returns, the upstream sees both connections closed,
// nothing of them is left running, and every connection is recorded.
func TestRedEgressSessionStopWhileTunnelsBusy(t *testing.T) {
	t.Run("bwrap", testRedEgressSessionStop)
	forEachContainerBackend(t, func(t *testing.T, _ string) { testRedEgressSessionStop(t) })
}

func testRedEgressSessionStop(t *testing.T) {
	w := newWorld(t)
	up := newUpstream(t, false, "127.0.0.2:0")
	st := newStreamer(t, "127.0.0.2:0")
	w.egressContract(up.port, st.port)
	mustWrite(t, filepath.Join(w.ws, "tunnel.pl"), redTunnel)
	target := "127.0.0.2:" + st.port
	marker := uniq("tunnel")
	id := w.startSession()
	// The loop waits for the tunnel with a deadline.
	r := w.cordon("", "exec", id, "--", "sh", "-c", `(setsid perl tunnel.pl `+target+` `+marker+` > bg.out 2>&1 &)
for i in $(seq 300); do grep -q "tunnel up" bg.out && exit 0; sleep 0.1; done; cat bg.out; exit 7`)
	if r.code != 0 {
		t.Fatalf("the background tunnel: %v", r)
	}
	const execs = 5
	for i := range execs {
		if r := w.cordon("", "exec", id, "--", "curl", "-sS", "--max-time", "10", "http://127.0.0.2:"+up.port+"/hello"); r.code != 0 || !strings.Contains(r.stdout, "hello from upstream") {
			t.Errorf("exec %d while the tunnel is busy: %v", i+1, r)
		}
	}
	fg, _, fgOut := w.startCordon("exec", id, "--", "perl", "tunnel.pl", target, marker)
	if !waitLine(fgOut, "tunnel up") {
		t.Fatal("the foreground tunnel never came up")
	}
	if n := st.open.Load(); n != 2 {
		t.Errorf("%d tunnels open upstream before the stop; want 2 (the background one kept across execs)", n)
	}
	if r := w.cordon("", "session", "stop", id); r.code != 0 {
		t.Errorf("session stop with busy tunnels: %v", r)
	}
	fgDone := make(chan error, 1)
	go func() { fgDone <- fg.Wait() }()
	select {
	case err := <-fgDone:
		t.Logf("the foreground exec ended: %v", err)
	case <-time.After(time.Minute):
		t.Error("the foreground exec did not return after session stop")
	}
	deadline := time.Now().Add(30 * time.Second)
	for st.open.Load() != 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := st.open.Load(); n != 0 {
		t.Errorf("%d tunnels still open upstream after session stop", n)
	}
	if ps := processesMatching(marker); len(ps) != 0 {
		t.Errorf("left running after session stop: %s", describeProcesses(ps))
	}
	tunnels, hellos := 0, 0
	for _, rec := range sessionEvents(t, w, id) {
		if rec.Type != "net.allow" {
			continue
		}
		switch b := string(rec.Body); {
		case strings.Contains(b, target):
			tunnels++
		case strings.Contains(b, "127.0.0.2:"+up.port):
			hellos++
		}
	}
	if tunnels != 2 || hellos != execs {
		t.Errorf("recorded %d tunnels and %d requests; want 2 and %d", tunnels, hellos, execs)
	}
}
